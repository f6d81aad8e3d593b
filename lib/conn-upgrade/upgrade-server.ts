import type { IncomingMessage } from 'node:http';
import { isIPv6, type BlockList } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ErrorCodes, GateError } from '../errors.js';
import { sourceOf } from '../handlers/connection-source.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { LogLimiter } from '../log-limiter.js';
import { isTrusted, trustedNetworks } from '../proxy-protocol/trusted-networks.js';
import type { Endpoint } from '../transport/endpoint.js';
import { UPGRADE_PROTOCOL_ALPN, UPGRADE_PROTOCOL_ALPN_PING } from '../wire/names.js';
import { checkUpgradeRequest, forwardedFor, isConnectionUpgradePath } from './upgrade-request.js';
import { CLOSE_TIMEOUT_MS, DEFAULT_MAX_MESSAGE_BYTES, SEND_MESSAGE_BYTES, WebSocketStream, type CarriedTally } from './websocket-stream.js';

/**
 * What takes an upgraded stream as a new connection: a Multiplexer (its `accept`), or anything
 * with the same contract (false: refused, and the stream destroyed).
 */
export interface StreamAcceptor {
  accept(stream: Duplex, endpoints: { remote: Endpoint; local: Endpoint }): boolean;
}

/** What a ConnectionUpgrade has done since it was made (every figure only grows). */
export interface UpgradeCounts extends CarriedTally {
  upgraded: number;
  refused: number;
  /** Refusals by the HTTP status answered ('400', '405', '426', '503', '404' for another path). */
  refusedByStatus: Record<string, number>;
}

/** Often enough for the common idle timeouts (nginx 60 s, AWS ALB 60 s, Cloudflare 100 s). */
export const DEFAULT_UPGRADE_PING_INTERVAL_MS = 15_000;

export interface ConnectionUpgradeSettings {
  /**
   * Load balancers whose `X-Forwarded-For` names the client (CIDRs or addresses, the shape of
   * `proxy_protocol_trusted_networks`). From them the header must name exactly one address, which
   * becomes the connection's client; from anywhere else it is ignored and the client is the
   * address the request came from. Default: none.
   */
  trustedNetworks?: readonly string[];
  /** WebSocket pings on `alpn-ping` upgrades (default 15 s). */
  pingIntervalMs?: number;
  /**
   * Largest WebSocket message accepted (default 64 KiB, at least 32 KiB: what our clients send at
   * most): a longer one closes the WebSocket with 1009 and fails the connection with
   * GATE_ERR_CONN_UPGRADE_MESSAGE. The fragments of one message count together.
   */
  maxMessageBytes?: number;
}

export interface ConnectionUpgradeOptions extends ConnectionUpgradeSettings {
  /** Where upgraded streams go; a function is asked per request (undefined: refused with 503). */
  target: StreamAcceptor | (() => StreamAcceptor | undefined);
  logger?: Logger;
}

/**
 * The server side of TLS routing through a load balancer that ends TLS:
 * `GET /webapi/connectionupgrade` with `Upgrade: websocket` and `Sec-WebSocket-Protocol: alpn`
 * (or `alpn-ping`) is answered 101, and the byte stream in the WebSocket's binary messages goes
 * to the target multiplexer as a new connection — detection, the inner TLS handshake with the
 * client's own SNI, ALPN and certificate, routing, limits, logs and counters as for a connection
 * on the port. Mount `handleUpgrade` on any HTTP server's 'upgrade' event (`attach` does it). A
 * bad request gets an HTTP error with a JSON body naming GATE_ERR_CONN_UPGRADE_REFUSED; refusals
 * are logged through a LogLimiter (a flood cannot become a flood of log lines) and counted.
 */
export class ConnectionUpgrade implements Closable {
  private readonly wss: WebSocketServer;
  private readonly lifecycle = new Lifecycle();
  private readonly logger: Logger;
  private readonly failureLog: LogLimiter;
  private readonly target: () => StreamAcceptor | undefined;
  private trusted: BlockList | undefined = undefined;
  private pingIntervalMs = DEFAULT_UPGRADE_PING_INTERVAL_MS;
  private maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
  /**
   * Upgrades answered 101, requests refused (in all, and by the HTTP status they were answered
   * with), and what the upgraded streams carried and sent: counted as it happens, so a scrape
   * sees the bytes of streams still open too.
   */
  readonly counts: UpgradeCounts = { upgraded: 0, refused: 0, refusedByStatus: {}, bytesIn: 0, bytesOut: 0, pingsSent: 0 };

  constructor(options: ConnectionUpgradeOptions) {
    const { target } = options;
    this.target = typeof target === 'function' ? target : () => target;
    this.logger = componentLogger(options.logger, 'conn-upgrade');
    this.failureLog = new LogLimiter(this.logger);
    this.setOptions(options);
    // The request was checked already; ws checks it again, answers 101 with the protocol chosen,
    // and enforces the message size. No compression: the stream is TLS, which does not compress.
    this.wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      perMessageDeflate: false,
      maxPayload: this.maxMessageBytes,
      closeTimeout: CLOSE_TIMEOUT_MS, // known to ws 8.18+, not to its type declarations
      handleProtocols: (offered) => [...offered].find((p) => p === UPGRADE_PROTOCOL_ALPN || p === UPGRADE_PROTOCOL_ALPN_PING) ?? false,
    } as ConstructorParameters<typeof WebSocketServer>[0]);
  }

  /** New settings for upgrades from now on (a reload); streams already carried keep theirs. */
  setOptions(settings: ConnectionUpgradeSettings): void {
    const max = settings.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    if (!Number.isInteger(max) || max < SEND_MESSAGE_BYTES) {
      throw new GateError(
        ErrorCodes.INVALID_ARGUMENT,
        `maxMessageBytes ${max}: at least ${SEND_MESSAGE_BYTES} (the largest message a client sends)`,
      );
    }
    const trusted = settings.trustedNetworks && settings.trustedNetworks.length > 0 ? trustedNetworks(settings.trustedNetworks) : undefined;
    this.trusted = trusted;
    this.pingIntervalMs = settings.pingIntervalMs ?? DEFAULT_UPGRADE_PING_INTERVAL_MS;
    this.maxMessageBytes = max;
    if (this.wss) this.wss.options.maxPayload = max;
  }

  /** Mounts the upgrade on `server`'s 'upgrade' event; other upgrade paths get 404. */
  attach(server: { on(event: 'upgrade', listener: (req: IncomingMessage, socket: Duplex, head: Buffer) => void): unknown }): void {
    server.on('upgrade', (req, socket, head) => {
      if (!this.handleUpgrade(req, socket, head)) {
        this.count(404);
        refuse(socket, 404, 'not_found', 'no such upgrade endpoint');
      }
    });
  }

  /**
   * Answers an HTTP/1.1 upgrade request. False when it is not for the connection-upgrade path
   * (nothing was written: the caller answers it); true when it was answered, with 101 or an error.
   */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (!isConnectionUpgradePath(req.url)) return false;
    socket.on('error', () => {}); // a reset before the answer is nobody's failure but the client's
    const from = peer(req);
    const check = checkUpgradeRequest(req);
    if (!check.ok) return this.refuse(socket, from, check.status, check.message);
    let remote = from;
    if (this.trusted && from.address !== '' && isTrusted(this.trusted, from.address)) {
      const client = forwardedFor(req.headers['x-forwarded-for']);
      if (!client.ok) return this.refuse(socket, from, 400, client.message);
      remote = { address: client.address, port: 0, family: isIPv6(client.address) ? 'IPv6' : 'IPv4' };
    }
    // Closed: its listeners are going too, and a stream handed on now would outlive the close.
    if (this.lifecycle.ending) return this.refuse(socket, from, 503, 'closing: no new upgrades');
    const target = this.target();
    if (!target) return this.refuse(socket, from, 503, 'TLS routing is off on this listener: nothing to carry the stream to');
    const local = { address: req.socket.localAddress ?? '', port: req.socket.localPort ?? 0, family: req.socket.remoteFamily ?? '' };
    const pingIntervalMs = check.protocol === UPGRADE_PROTOCOL_ALPN_PING ? this.pingIntervalMs : 0;
    this.wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      this.counts.upgraded++;
      const stream = new WebSocketStream(ws, { pingIntervalMs, tally: this.counts });
      target.accept(stream, { remote, local });
    });
    return true;
  }

  private count(status: number): void {
    this.counts.refused++;
    this.counts.refusedByStatus[status] = (this.counts.refusedByStatus[status] ?? 0) + 1;
  }

  private refuse(socket: Duplex, from: Endpoint, status: number, message: string): true {
    this.count(status);
    const code = ErrorCodes.CONN_UPGRADE_REFUSED;
    this.failureLog.log('info', code, { remote: from.address, status, code }, message);
    refuse(socket, status, code, message);
    return true;
  }

  /** open, or closed: the upgraded streams belong to the multiplexer they were handed to. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Flushes the held-back failure counts (no timer left behind); nothing to drain, resolves at once. */
  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => this.failureLog.flush());
  }

  /** Flushes the held-back failure counts now. */
  destroy(_err?: GateError): void {
    if (this.lifecycle.destroy()) this.failureLog.flush();
  }
}

/**
 * Where the request came from: the socket's peer, or, when the connection came through a
 * multiplexer whose PROXY protocol named a client (from a trusted network), that client. A
 * balancer speaking PROXY protocol to the port sits in front of the HTTP hop, so its client is
 * the one the upgraded stream belongs to (and the one whose X-Forwarded-For may be trusted).
 */
function peer(req: IncomingMessage): Endpoint {
  const s = req.socket;
  const address = sourceOf(s) ?? '';
  if (address === (s.remoteAddress ?? '')) return { address, port: s.remotePort ?? 0, family: s.remoteFamily ?? '' };
  // The PROXY header's port is not kept with the address: 0, as for an X-Forwarded-For client.
  return { address, port: 0, family: isIPv6(address) ? 'IPv6' : 'IPv4' };
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  426: 'Upgrade Required',
  503: 'Service Unavailable',
};

/** An HTTP/1.1 error on a socket that asked to upgrade, then the socket closes. */
function refuse(socket: Duplex, status: number, code: string, message: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      (status === 426 ? 'Sec-WebSocket-Version: 13\r\n' : '') +
      `\r\n${body}`,
  );
  // end() waits for the client to read; a client that never reads must not hold the socket.
  socket.once('finish', () => socket.destroy());
}
