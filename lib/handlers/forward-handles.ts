import { ErrorCodes, GateError } from '../errors.js';
import { HandleRelay, type RelayFailure } from '../transport/handle-relay.js';
import type { NativeEnd, NativeOwner, NativeRelay } from '../transport/native-relay.js';
import { closeHandle, errnoError, type TcpHandle } from '../transport/uv.js';
import { dialFailure, dialHandle, dialTimeout } from '../transport/handle-dial.js';
import type { HandleEnd } from '../transport/client-end.js';
import type { ConnectionParts as Connection } from './context.js';
import type { WatchRelay } from './bare-client.js';
import type { ForwardHandler, UpstreamAddress } from './types.js';
import { DEFAULT_DIAL_TIMEOUT_MS, proxyHeaderFor, upstreamOf } from './forward.js';
import { refuseClient, refusalFor } from './refuse.js';
import type { Lookup } from '../transport/address-order.js';

/**
 * `forward` on bare handles (transport/uv.ts): the client handle and a freshly dialed upstream handle
 * are joined by a HandleRelay, with the PROXY header (if configured) and the peeked bytes sent
 * first. The same contract as runForward on sockets: dial timeout, refused/failed dial codes,
 * half-close, resets named by side. `onRelay`, when given, sees the relay once it runs (idle sweeps).
 * With `native`, the client goes to the native relay, which dials and relays.
 */
export function forwardOnHandles(
  client: HandleEnd,
  rest: Buffer,
  handler: ForwardHandler,
  conn: Connection,
  onRelay?: WatchRelay,
  native?: NativeRelayUse,
): void {
  const to = upstreamOf(handler, conn.info);
  const dial = new ForwardDial(client, rest, handler, to, conn, onRelay);
  conn.attach(dial);
  dial.cancelDial = dialHandle(
    to.host,
    to.port,
    {
      timeoutMs: handler.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS,
      lookup: handler.lookup as Lookup | undefined,
      // The native side dials one address itself, with its own deadline; a name with several is
      // dialed here, address by address, and relayed by the handle relay.
      takeOver: native ? (address) => dial.dialNatively(address.address, address.family, native) : undefined,
    },
    (outcome) => (outcome instanceof GateError ? dial.failed(outcome) : dial.connected(outcome)),
  );
}

/** One upstream dial (transport/handle-dial.ts): a connection part until the relay takes over. */
class ForwardDial {
  /** Cancels the dial under way (set once it starts). */
  cancelDial: (() => void) | undefined;
  private done = false;

  constructor(
    private readonly client: HandleEnd,
    private readonly rest: Buffer,
    private readonly handler: ForwardHandler,
    private readonly to: UpstreamAddress,
    private readonly conn: Connection,
    private readonly onRelay: WatchRelay | undefined,
  ) {}

  connected(upstream: TcpHandle): void {
    if (this.done) return closeHandle(upstream);
    this.finish();
    upstream.setNoDelay(true);
    // The relay's callback holds only what it needs, never the dial: an idle relay would keep the
    // dial and all it held (the peeked ClientHello, the attempts, the deadline's timer and its
    // closures) for the connection's whole life, ~1 KiB per idle connection (BENCHMARKS.md).
    const { conn, to } = this;
    const initial = this.initialBytes();
    const clientHandle = this.client.take();
    const relay = new HandleRelay(clientHandle, upstream, (failure) => relayClosed(conn, relay, failure, to));
    conn.handOver(relay, relay);
    conn.closed(this);
    this.onRelay?.(relay, conn);
    relay.start(initial);
  }

  /** The PROXY header (if configured) and the peeked bytes: what the upstream gets first. */
  private initialBytes(): Buffer {
    const { handler, conn } = this;
    // The PROXY header goes out before any client byte (caddy-l4 #212: servers that speak first
    // must learn the client address before they greet).
    const header = handler.sendProxyHeader ? proxyHeaderFor(handler.sendProxyHeader, conn.info) : undefined;
    return header ? Buffer.concat([header, this.rest]) : this.rest;
  }

  /**
   * The native side dials and relays: the connect's completion, its timeout and the
   * relay run without JavaScript; the end report says whether the dial failed, for the same
   * codes as a dial here. A failure to hand over (no descriptor left) is this dial's failure, as
   * the socket() of a dial here would fail the same way. False (nothing done) when the client
   * handle still has a write queued in libuv, which the native side would lose: dial here then.
   */
  dialNatively(address: string, family: 4 | 6, native: NativeRelayUse): boolean {
    const { conn, handler, to } = this;
    const clientHandle = this.client.take();
    if (clientHandle.writeQueueSize > 0) return false;
    const dialTimeoutMs = handler.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
    const part = new NativeConnection(conn, native.relay, clientHandle.bytesRead, clientHandle.bytesWritten, to, dialTimeoutMs);
    const id = native.relay.dial(
      clientHandle,
      address,
      to.port,
      family,
      this.initialBytes(),
      native.idleTimeoutMs,
      native.splice,
      dialTimeoutMs,
      part,
    );
    this.finish();
    closeHandle(clientHandle); // the native side holds its own duplicate (or, on a failure, nothing)
    conn.handOver(part, part);
    conn.closed(this);
    if (typeof id === 'string') part.onNativeEnd({ code: id, side: 'upstream', dial: true, clientRead: 0, clientWritten: 0 });
    else part.id = id;
    return true;
  }

  failed(error: GateError): void {
    if (this.done) return;
    const protocol = refusalFor(this.handler.refusal, undefined, this.conn.info);
    if (!protocol) {
      this.conn.fail(error);
      return this.destroy();
    }
    // The client is told why in its protocol (only now does its handle become a socket, on this
    // failure path); the connection still fails with the dial's code.
    const { conn } = this;
    conn.recordError(error, 'upstream');
    const socket = this.client.toSocket(Buffer.alloc(0));
    conn.handOver(socket, socket);
    this.destroy();
    refuseClient(socket, error, protocol, this.rest);
  }

  destroy(): void {
    if (this.done) return;
    this.finish();
    this.conn.closed(this);
  }

  private finish(): void {
    this.done = true;
    this.cancelDial?.();
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
  /** Move bytes with splice(2) through a pipe instead of recv/send (BENCHMARKS.md). */
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
    /** When the native side dials: its timeout, for the message. */
    private readonly dialTimeoutMs = 0,
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
    if (end.dial) {
      const { host, port } = this.to;
      const timedOut = end.code === 'DIAL_TIMEOUT';
      this.conn.recordError(timedOut ? dialTimeout(host, port, this.dialTimeoutMs) : dialFailure(errnoError(end.code), host, port));
    } else if (end.code === 'IDLE') this.conn.recordError(new GateError(ErrorCodes.IDLE_TIMEOUT, 'idle timeout (native relay)'));
    else if (end.code !== '' && end.code !== 'DESTROYED')
      this.conn.recordError(relayFailure({ side: end.side ?? 'client', code: end.code }, this.to));
    this.conn.closed(this);
  }
}
