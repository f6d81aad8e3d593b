import { loadNativeRelay } from '../../lib/transport/native-relay.js';

/**
 * The ways a forwarded connection can be carried: every relay suite runs on each. The native
 * relay twice, moving bytes with recv/send and with splice(2).
 */
export type Transport = 'native' | 'native-splice' | 'handles' | 'socket';

export interface TransportOptions {
  fastPath: boolean;
  nativeRelay: boolean;
  nativeSplice: boolean;
}

export const TRANSPORT_OPTIONS: Record<Transport, TransportOptions> = {
  native: { fastPath: true, nativeRelay: true, nativeSplice: false },
  'native-splice': { fastPath: true, nativeRelay: true, nativeSplice: true },
  handles: { fastPath: true, nativeRelay: false, nativeSplice: false },
  socket: { fastPath: false, nativeRelay: false, nativeSplice: false },
};

/** How test names call each transport. */
export const TRANSPORT_LABEL: Record<Transport, string> = {
  native: 'the native relay (recv/send)',
  'native-splice': 'the native relay (splice)',
  handles: 'bare handles',
  socket: 'net.Socket',
};

/**
 * The transports this machine can run. The native relay needs its addon built, which is opt-in
 * (`npm run build:native`; .ci/run builds it): in CI a missing build is a failure, on a developer
 * machine the native runs are skipped with that hint.
 */
export function availableTransports(t: { fail(message: string): void; comment(message: string): void }): Transport[] {
  const native = loadNativeRelay({});
  if (native.ok) return ['native', 'native-splice', 'handles', 'socket'];
  if (process.env.CI) t.fail(`the native relay is not available in CI: ${native.reason}`);
  else t.comment(`skipping the native relay runs (${native.reason}); build it with: npm run build:native`);
  return ['handles', 'socket'];
}
