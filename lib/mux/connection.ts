import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import type { HandlerContext } from '../handlers/context.js';
import type { ConnectionInfo, Endpoint } from './types.js';

function endpoint(address: string | undefined, port: number | undefined, family: string | undefined): Endpoint {
  return { address: address ?? '', port: port ?? 0, family: family ?? '' };
}

/**
 * One accepted client connection and the streams that belong to it (upstream socket, TLS
 * wrapper). It ends when every adopted stream has closed; then `onFinish` runs exactly once.
 */
export class Connection implements HandlerContext {
  readonly info: ConnectionInfo;
  readonly logger: Logger;
  readonly socket: Socket;
  error: GateError | undefined;
  routed = false;
  private readonly streams = new Set<Duplex>();
  private finished = false;

  constructor(
    id: number,
    socket: Socket,
    logger: Logger,
    private readonly onFinish: (conn: Connection) => void,
  ) {
    this.socket = socket;
    this.logger = logger;
    this.info = {
      id,
      protocol: 'silent',
      sni: undefined,
      alpn: [],
      negotiatedAlpn: undefined,
      remote: endpoint(socket.remoteAddress, socket.remotePort, socket.remoteFamily),
      local: endpoint(socket.localAddress, socket.localPort, socket.remoteFamily),
      proxyHeader: undefined,
      postgresSslRequest: false,
      route: '',
      helloBytes: undefined,
    };
    this.adopt(socket);
  }

  /**
   * `side` names whose failure a bare stream error is ('upstream' for dialed sockets), so a
   * reset is logged as GATE_ERR_UPSTREAM_RESET or GATE_ERR_CLIENT_RESET as it really was.
   */
  adopt(stream: Duplex, side: 'client' | 'upstream' = 'client'): void {
    if (this.streams.has(stream)) return;
    if (this.finished || stream.destroyed) {
      stream.destroy();
      return;
    }
    this.streams.add(stream);
    // An error nobody else listens to must not crash the process; `fail` records the first one.
    stream.on('error', (err) => this.recordError(err, side));
    stream.once('close', () => {
      this.streams.delete(stream);
      if (stream === this.socket) this.destroyAll(); // no client, nothing left to serve
      if (this.streams.size === 0) this.finish();
    });
  }

  fail(error: Error): void {
    this.recordError(error);
    this.destroyAll();
  }

  /** Destroys every stream of this connection (shutdown after grace, failures). */
  destroyAll(): void {
    // Newest first: a TLSSocket (or other wrapper) goes before the socket under it. Destroying
    // the raw socket first from inside the TLSSocket's 'secure' event (an mTLS rejection)
    // corrupts memory in Node 20.20 (SIGSEGV / "malloc(): unsorted double linked list corrupted").
    for (const stream of [...this.streams].reverse()) stream.destroy();
  }

  private recordError(err: Error, side: 'client' | 'upstream' = 'client'): void {
    if (this.error) return;
    this.error =
      err instanceof GateError
        ? err
        : new GateError(
            side === 'upstream' ? ErrorCodes.UPSTREAM_RESET : this.routed ? ErrorCodes.CLIENT_RESET : ErrorCodes.CLIENT_CLOSED,
            `connection failed: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
            { cause: err },
          );
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.onFinish(this);
  }
}
