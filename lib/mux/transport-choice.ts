import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { NativeRelayUse } from '../handlers/forward-handles.js';
import type { ConnectionInfo } from '../handlers/types.js';
import type { Logger } from '../log.js';
import type { ProxyHeader } from '../proxy-protocol/header.js';
import { ErrorCodes, GateError } from '../errors.js';
import type { WatchRelay } from '../handlers/bare-client.js';
import { IdleSweep } from '../transport/idle-sweep.js';
import { envSwitch, loadNativeRelay, NATIVE_RELAY_ENV, nativeSpliceWanted } from '../transport/native-relay.js';
import type { Connection } from './connection.js';
import type { MultiplexerOptions } from './types.js';

// What the multiplexer asks of the transport under a connection (docs/ARCHITECTURE.md, "The
// transports"), and what a PROXY header changes in its info: small decisions kept out of
// multiplexer.ts, which detects and routes.

/** net.Socket, and carried streams that keep an idle timer the same way (the WebSocket stream). */
export function hasIdleTimeout(stream: Duplex): stream is Duplex & { setTimeout(ms: number, onTimeout: () => void): unknown } {
  return stream instanceof Socket || typeof (stream as { setTimeout?: unknown }).setTimeout === 'function';
}

/**
 * A PROXY header's endpoints replace the socket's. v2 LOCAL and v1 UNKNOWN / v2 AF_UNSPEC carry
 * no addresses: the connection's own addresses stand (proxy-protocol.txt §2.2).
 */
export function applyProxyHeader(info: ConnectionInfo, header: ProxyHeader): void {
  info.proxyHeader = header;
  const { source, destination } = header;
  if (source) info.remote = { address: source.address, port: source.port, family: source.family };
  if (destination) info.local = { address: destination.address, port: destination.port, family: destination.family };
}

let fastPathOffReported = false;

/** Once per process: every multiplexer shares the one self-test, so one line says why. */
export function reportFastPathOff(logger: Logger, reason: string): void {
  if (fastPathOffReported) return;
  fastPathOffReported = true;
  logger.warn({ reason }, 'passthrough runs on net.Socket (bare-handle fast path off)');
}

let nativeOffReported = false;

function nativeRelayUse(logger: Logger, idleTimeoutMs: number, splice: boolean): NativeRelayUse | undefined {
  const load = loadNativeRelay();
  if (load.ok) return { relay: load.relay, idleTimeoutMs, splice };
  if (!nativeOffReported) {
    nativeOffReported = true;
    logger.warn({ reason: load.reason }, 'native relay off: forward routes relay in TypeScript');
  }
  return undefined;
}

/** What puts each relay routed from now on under an idle sweep of `idleTimeoutMs` (0: none). */
export function idleWatch(idleTimeoutMs: number): WatchRelay | undefined {
  if (idleTimeoutMs <= 0) return undefined;
  const idle = new IdleSweep<{ readonly reads: number }>(idleTimeoutMs);
  return (relay, conn) => {
    (conn as Connection).idleSweep = idle;
    idle.add(relay, () => conn.fail(new GateError(ErrorCodes.IDLE_TIMEOUT, `idle for ${idleTimeoutMs} ms`)));
  };
}

/** The native relay when asked for (`nativeRelay`, else GATE_MUX_NATIVE_RELAY) and it loads. */
export function nativeRelayFor(options: MultiplexerOptions, logger: Logger, idleTimeoutMs: number): NativeRelayUse | undefined {
  const wanted = options.nativeRelay ?? envSwitch(process.env[NATIVE_RELAY_ENV]) === true;
  return wanted ? nativeRelayUse(logger, idleTimeoutMs, nativeSpliceWanted(options.nativeSplice)) : undefined;
}
