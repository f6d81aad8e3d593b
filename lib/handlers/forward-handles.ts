import { lookup } from 'node:dns';
import { isIP } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { HandleRelay, type RelayFailure } from '../transport/handle-relay.js';
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
export function forwardOnHandles(client: HandleEnd, rest: Buffer, handler: ForwardHandler, conn: Connection, onRelay?: (relay: HandleRelay, conn: Connection) => void): void {
  const to = upstreamOf(handler, conn.info);
  const dial = new HandleDial(client, rest, handler, to, conn, onRelay);
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
    const relay = new HandleRelay(this.client.take(), upstream, (failure) => relayClosed(conn, relay, failure, this.to));
    conn.handOver(relay, relay);
    conn.closed(this);
    this.onRelay?.(relay, conn);
    // The PROXY header goes out before any client byte (caddy-l4 #212: servers that speak first
    // must learn the client address before they greet).
    const header = handler.sendProxyHeader ? proxyHeaderFor(handler.sendProxyHeader, conn.info) : undefined;
    relay.start(header ? Buffer.concat([header, this.rest]) : this.rest);
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
  if (failure) {
    const upstream = failure.side === 'upstream';
    const where = upstream ? `upstream ${to.host}:${to.port}` : 'client';
    conn.recordError(new GateError(upstream ? ErrorCodes.UPSTREAM_RESET : ErrorCodes.CLIENT_RESET, `${where} connection failed: ${failure.code}`));
  }
  conn.closed(relay);
}
