import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { TcpHandle } from './uv.js';

/**
 * The optional native relay (native/relay.cc): after routing, a passthrough connection's client
 * socket is handed to one epoll thread in C++ that dials the upstream (connect timeout included)
 * and relays both ways with backpressure, half-close and the idle timeout, and reports the end
 * once. Detection, routing, name lookup, stats and logs stay in TypeScript. Optional, as `ws` treats `bufferutil`: when the
 * addon is not built, does not load, or `GATE_MUX_NATIVE_RELAY=0`, the TypeScript relay runs.
 */
export const NATIVE_RELAY_ENV = 'GATE_MUX_NATIVE_RELAY';
/** `GATE_MUX_NATIVE_SPLICE=1`: the native relay moves bytes with splice(2) (0: recv/send). */
export const NATIVE_SPLICE_ENV = 'GATE_MUX_NATIVE_SPLICE';

interface Binding {
  start(onEnd: (id: number, code: string, side: string, clientRead: number, clientWritten: number, dial: boolean) => void): void;
  /**
   * Duplicates the client's descriptor, opens the upstream socket and starts its connect; the
   * caller closes its client handle. Throws with an errno name, `dial: true` when the connect failed.
   */
  dial(
    clientFd: number,
    address: string,
    port: number,
    ipv6: boolean,
    initial: Buffer | null,
    idleMs: number,
    splice: boolean,
    dialTimeoutMs: number,
  ): number;
  destroy(id: number): void;
  ref(): void;
  unref(): void;
}

/** What this code calls on the addon: a binary built from another version's sources lacks some. */
const BINDING_FUNCTIONS = ['start', 'dial', 'destroy', 'ref', 'unref'] as const;

/**
 * How a native relay ended: `code` '' (both sides finished), an errno name, 'IDLE' or
 * 'DESTROYED'; with `dial` the upstream's connect failed (an errno name) or timed out ('DIAL_TIMEOUT').
 */
export interface NativeEnd {
  code: string;
  side: 'client' | 'upstream' | undefined;
  dial: boolean;
  /** Bytes the relay read from the client and wrote to it (the detection phase not included). */
  clientRead: number;
  clientWritten: number;
}

/** Whether the native relay can run in this process, and if not why (for health checks and support). */
export function nativeRelayStatus(): { available: true } | { available: false; reason: string } {
  const load = loadNativeRelay();
  return load.ok ? { available: true } : { available: false, reason: load.reason };
}

/** An on/off environment switch: 1/on/true, 0/off/false (any case), otherwise undefined (not set). */
export function envSwitch(value: string | undefined): boolean | undefined {
  const v = value?.trim().toLowerCase();
  if (v === '1' || v === 'on' || v === 'true') return true;
  if (v === '0' || v === 'off' || v === 'false') return false;
  return undefined;
}

/**
 * Whether the native relay splices (splice(2) through a pipe) or reads and writes: `nativeSplice`
 * when given, else GATE_MUX_NATIVE_SPLICE, else the default measured in BENCHMARKS.md.
 */
export function nativeSpliceWanted(option: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  return option ?? envSwitch(env[NATIVE_SPLICE_ENV]) ?? NATIVE_SPLICE_DEFAULT;
}

/**
 * splice: bulk router CPU per GB about half of recv/send's (0.27 vs 0.50 s/GB in one run, nginx
 * 0.56) for ~2k more instructions per short connection (docs/benchmarks-archive.md, "The native relay, by phase").
 */
export const NATIVE_SPLICE_DEFAULT = true;

export type NativeRelayLoad = { ok: true; relay: NativeRelay } | { ok: false; reason: string };

let loaded: NativeRelayLoad | undefined;

/** Loads the addon once per process, if it was built (`npm run build:native`; a packager's prebuild). */
export function loadNativeRelay(env: NodeJS.ProcessEnv = process.env): NativeRelayLoad {
  if (envSwitch(env[NATIVE_RELAY_ENV]) === false)
    return { ok: false, reason: `turned off by ${NATIVE_RELAY_ENV}=${env[NATIVE_RELAY_ENV]}` };
  if (loaded) return loaded;
  try {
    const require = createRequire(import.meta.url);
    const nodeGypBuild = require('node-gyp-build') as (dir: string) => Binding;
    // dist/lib/transport/ → the package root, where binding.gyp, build/ and prebuilds/ are.
    const binding = nodeGypBuild(fileURLToPath(new URL('../../../', import.meta.url)));
    // A stale build/ (sources changed, addon not rebuilt) would otherwise fail every connection
    // at its dial; refused here, the TypeScript relay runs and the reason is logged once.
    const missing = BINDING_FUNCTIONS.filter((name) => typeof (binding as unknown as Record<string, unknown>)[name] !== 'function');
    if (missing.length > 0) {
      loaded = {
        ok: false,
        reason: `the native relay addon is from another version (no ${missing.join(', ')}): rebuild it with npm run build:native`,
      };
      return loaded;
    }
    loaded = { ok: true, relay: new NativeRelay(binding) };
  } catch (err) {
    const message = err instanceof Error ? err.message.split('\n')[0]! : String(err);
    // Installing the package builds nothing: the relay is built by those who ask for it.
    loaded = {
      ok: false,
      reason: message.startsWith('No native build was found')
        ? `the native relay is not built (it is opt-in: npm run build:native in the gate-mux package's directory)`
        : `the native relay did not load: ${message}`,
    };
  }
  return loaded;
}

/** Receives the end of a native connection, once. */
export interface NativeOwner {
  onNativeEnd(end: NativeEnd): void;
}

export class NativeRelay {
  private readonly owners = new Map<number, NativeOwner>();

  constructor(private readonly binding: Binding) {
    binding.start((id, code, side, clientRead, clientWritten, dial) => {
      const owner = this.owners.get(id);
      if (!owner) return;
      this.owners.delete(id);
      // The addon's callback does not hold the event loop open by itself: while connections
      // run it must (their ends are still to be delivered), and not a moment longer.
      if (this.owners.size === 0) binding.unref();
      owner.onNativeEnd({ code, side: side === 'client' || side === 'upstream' ? side : undefined, dial, clientRead, clientWritten });
    });
  }

  /** Connections the native side holds now. */
  get size(): number {
    return this.owners.size;
  }

  /**
   * Hands the client over and has the native side dial `address`:`port` (an IP address) and
   * relay once connected, with `dialTimeoutMs` (0: none) for the connect. The client handle is
   * closed here when the native side took it. Returns the connection id, or the errno name of a
   * failure, the handle then untouched.
   */
  dial(
    client: TcpHandle,
    address: string,
    port: number,
    family: 4 | 6,
    initial: Buffer,
    idleMs: number,
    splice: boolean,
    dialTimeoutMs: number,
    owner: NativeOwner,
  ): number | string {
    let id: number;
    try {
      id = this.binding.dial(client.fd, address, port, family === 6, initial.length > 0 ? initial : null, idleMs, splice, dialTimeoutMs);
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
    this.own(id, owner);
    return id;
  }

  private own(id: number, owner: NativeOwner): void {
    if (this.owners.size === 0) this.binding.ref();
    this.owners.set(id, owner);
  }

  /** Ends a connection now (shutdown grace over, a failure elsewhere): its end says DESTROYED. */
  destroy(id: number): void {
    this.binding.destroy(id);
  }
}
