import { loadNativeRelay } from '../../lib/transport/native-relay.js';

/** The three ways a forwarded connection can be carried: every relay suite runs on each. */
export type Transport = 'native' | 'handles' | 'socket';

export interface TransportOptions {
  fastPath: boolean;
  nativeRelay: boolean;
}

export const TRANSPORT_OPTIONS: Record<Transport, TransportOptions> = {
  native: { fastPath: true, nativeRelay: true },
  handles: { fastPath: true, nativeRelay: false },
  socket: { fastPath: false, nativeRelay: false },
};

/**
 * The transports this machine can run. The native relay needs its addon built (npm ci builds it;
 * `npx node-gyp rebuild` by hand): in CI a missing build is a failure, on a developer machine the
 * native runs are skipped with that hint.
 */
export function availableTransports(t: { fail(message: string): void; comment(message: string): void }): Transport[] {
  const native = loadNativeRelay({});
  if (native.ok) return ['native', 'handles', 'socket'];
  if (process.env.CI) t.fail(`the native relay is not available in CI: ${native.reason}`);
  else t.comment(`skipping the native relay runs (${native.reason}); build it with: npx node-gyp rebuild`);
  return ['handles', 'socket'];
}
