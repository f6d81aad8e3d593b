import { lookup } from 'node:dns';
import { isIP } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { HandleRelay, type RelayFailure } from '../transport/handle-relay.js';
import type { NativeEnd, NativeOwner, NativeRelay } from '../transport/native-relay.js';
import { closeHandle, connectTcp, errnoError, type HandleOwner, type TcpHandle } from '../transport/uv.js';
import type { HandleEnd } from '../transport/client-end.js';
import type { ConnectionParts as Connection } from './context.js';
import type { ForwardHandler, UpstreamAddress } from './types.js';
import { DEFAULT_DIAL_TIMEOUT_MS, dialError, proxyHeaderFor, upstreamOf } from './forward.js';

/**
 * `forward` on bare handles (mux/uv.ts): the client handle and a freshly dialed upstream handle
 * are joined by a HandleRelay, with the PROXY header (if configured) and the peeked bytes sent
 * first. The same contract as runForward on sockets: dial timeout, refused/failed dial codes,
 * half-close, resets named by side. `onRelay`, when given, sees the relay once it runs (idle sweeps).
 */
export function forwardOnHandles(
  client: HandleEnd,
  rest: Buffer,
  handler: ForwardHandler,
  conn: Connection,
  onRelay?: (relay: HandleRelay, conn: Connection) => void,
  native?: NativeRelayUse,
): void {
  const to = upstreamOf(handler, conn.info);
  const dial = new HandleDial(client, rest, handler, to, conn, onRelay, native);
  conn.attach(dial);
  const family = isIP(to.host);
  if (family !== 0) return dial.connect(to.host, family === 6 ? 6 : 4);
  lookup(to.host, (err, address, found) => {
    if (err) dial.failed(dialError(err, to));
    else dial.connect(address, found === 6 ? 6 : 4);
  });
}

/** One upstream dial: a connection part until the relay takes over. */
class HandleDial implements HandleOwner {
  private upstream: TcpHandle | undefined;
  private done = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly client: HandleEnd,
    private readonly rest: Buffer,
    private readonly handler: ForwardHandler,
    private readonly to: UpstreamAddress,
    private readonly conn: Connection,
    private readonly onRelay: ((relay: HandleRelay, conn: Connection) => void) | undefined,
    private readonly native: NativeRelayUse | undefined,
  ) {
    const dialTimeoutMs = handler.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
    this.timer = setTimeout(() => {
      this.failed(new GateError(ErrorCodes.DIAL_TIMEOUT, `upstream ${to.host}:${to.port} did not accept within ${dialTimeoutMs} ms`));
    }, dialTimeoutMs);
  }

  connect(address: string, family: 4 | 6): void {
    if (this.done) return;
    const handle = connectTcp(address, this.to.port, family, this);
    if (typeof handle === 'string') return this.failed(dialError(errnoError(handle), this.to));
    this.upstream = handle;
  }

  onHandleConnect(upstream: TcpHandle, error: string | undefined): void {
    if (this.done) return;
    if (error !== undefined) return this.failed(dialError(errnoError(error), this.to));
    this.finish();
    upstream.setNoDelay(true);
    const { conn, handler } = this;
    // The PROXY header goes out before any client byte (caddy-l4 #212: servers that speak first
    // must learn the client address before they greet).
    const header = handler.sendProxyHeader ? proxyHeaderFor(handler.sendProxyHeader, conn.info) : undefined;
    const initial = header ? Buffer.concat([header, this.rest]) : this.rest;
    const clientHandle = this.client.take();
    if (this.native && this.handOverToNative(clientHandle, upstream, initial, this.native)) return;
    const relay = new HandleRelay(clientHandle, upstream, (failure) => relayClosed(conn, relay, failure, this.to));
    conn.handOver(relay, relay);
    conn.closed(this);
    this.onRelay?.(relay, conn);
    relay.start(initial);
  }

  /** False (nothing changed) when the native side could not take the sockets: relay here instead. */
  private handOverToNative(clientHandle: TcpHandle, upstream: TcpHandle, initial: Buffer, native: NativeRelayUse): boolean {
    const { conn } = this;
    // Bytes libuv still holds for the client (a queued write) would be lost to the native side.
    if (clientHandle.writeQueueSize > 0) return false;
    const part = new NativeConnection(conn, native.relay, clientHandle.bytesRead, clientHandle.bytesWritten, this.to);
    const id = native.relay.adopt(clientHandle, upstream, initial, native.idleTimeoutMs, native.splice, part);
    if (typeof id === 'string') return false;
    part.id = id;
    // The descriptors are the native side's now (duplicated): these handles only close.
    closeHandle(clientHandle);
    closeHandle(upstream);
    conn.handOver(part, part);
    conn.closed(this);
    return true;
  }

  // A dialing handle reads nothing: these never fire before the relay owns it.
  onHandleData(): void {}
  onHandleEnd(): void {}

  failed(error: GateError): void {
    if (this.done) return;
    this.conn.fail(error);
    this.destroy();
  }

  destroy(): void {
    if (this.done) return;
    this.finish();
    if (this.upstream) closeHandle(this.upstream);
    this.conn.closed(this);
  }

  private finish(): void {
    this.done = true;
    clearTimeout(this.timer);
  }
}

function relayClosed(conn: Connection, relay: HandleRelay, failure: RelayFailure | undefined, to: UpstreamAddress): void {
  if (failure) conn.recordError(relayFailure(failure, to));
  conn.closed(relay);
}

/** A relay's failure, named by side: the same codes whichever relay carried the bytes. */
function relayFailure(failure: RelayFailure, to: UpstreamAddress): GateError {
  const upstream = failure.side === 'upstream';
  const where = upstream ? `upstream ${to.host}:${to.port}` : 'client';
  return new GateError(upstream ? ErrorCodes.UPSTREAM_RESET : ErrorCodes.CLIENT_RESET, `${where} connection failed: ${failure.code}`);
}

/** The native relay as the multiplexer hands it in, with the idle timeout it enforces there. */
export interface NativeRelayUse {
  relay: NativeRelay;
  idleTimeoutMs: number;
  /** Move bytes with splice(2) through a pipe instead of recv/send (BENCHMARKS.md, issue 17). */
  splice: boolean;
}

/**
 * A connection the native relay carries: a part of the connection until its one end report.
 * Counts are the client handle's at handover (the detection bytes) plus the native side's.
 */
class NativeConnection implements NativeOwner {
  id = 0;
  private read = 0;
  private written = 0;

  constructor(
    private readonly conn: Connection,
    private readonly relay: NativeRelay,
    private readonly readBefore: number,
    private readonly writtenBefore: number,
    private readonly to: UpstreamAddress,
  ) {}

  get bytesRead(): number {
    return this.readBefore + this.read;
  }

  get bytesWritten(): number {
    return this.writtenBefore + this.written;
  }

  /** Asynchronous: the native side closes both sockets and reports DESTROYED, then closed(). */
  destroy(): void {
    this.relay.destroy(this.id);
  }

  onNativeEnd(end: NativeEnd): void {
    this.read = end.clientRead;
    this.written = end.clientWritten;
    if (end.code === 'IDLE') this.conn.recordError(new GateError(ErrorCodes.IDLE_TIMEOUT, 'idle timeout (native relay)'));
    else if (end.code !== '' && end.code !== 'DESTROYED') this.conn.recordError(relayFailure({ side: end.side ?? 'client', code: end.code }, this.to));
    this.conn.closed(this);
  }
}
