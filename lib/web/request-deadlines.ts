import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Http2Server, Http2SecureServer, Http2Session, ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { DEFAULT_WEB_HEADERS_TIMEOUT_MS, DEFAULT_WEB_REQUEST_TIMEOUT_MS } from '../config/gate-schema.js';

/** The web endpoints' deadlines (`proxy_service.web_headers_timeout`, `web_request_timeout`). */
export interface RequestDeadlines {
  /** From a connection's start (after TLS) until its first request's headers are complete. */
  headersTimeoutMs: number;
  /** From the same start until that request's body is complete (or it has been answered). */
  requestTimeoutMs: number;
  /**
   * How long a connection that finished a request may wait for the next one's first byte: the next
   * request's deadlines are counted from the previous answer plus this (Node's keep-alive default).
   */
  keepAliveTimeoutMs: number;
}

/** The defaults the configuration applies (its reasons are beside them); keep-alive as Node's. */
export const DEFAULT_REQUEST_DEADLINES: RequestDeadlines = {
  headersTimeoutMs: DEFAULT_WEB_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: DEFAULT_WEB_REQUEST_TIMEOUT_MS,
  keepAliveTimeoutMs: 5_000,
};

/** An expired deadline: the code says which, `remote` who (when the socket still knows). */
export type DeadlineExpired = (error: GateError, remote: string | undefined) => void;

/** Past this after the 408, a client that neither reads nor closes is cut. */
const CLOSE_GRACE_MS = 1_000;

/** One armed deadline; `cancel` stops it, even once it has fired and waits in the expiry queue. */
interface Deadline {
  timeout: NodeJS.Timeout;
  cancelled: boolean;
}

/** Cleared when its connection or session closes; `undefined` while none is armed. */
interface Timers {
  headers: Deadline | undefined;
  request: Deadline | undefined;
}

/**
 * Deadlines armed together expire together: 100 connections opened in one burst reach their
 * header deadline within a millisecond, and answering them all in one turn of the event loop held
 * it up to 294 ms under the ping guard on a busy machine. So expiries run at most EXPIRY_BATCH to a
 * turn, the rest in the next ones (setImmediate), and a ping waits for one batch at most.
 */
const EXPIRY_BATCH = 16;
const due: Array<() => void> = [];
let draining = false;

function drain(): void {
  for (let n = 0; n < EXPIRY_BATCH && due.length > 0; n++) due.shift()?.();
  if (due.length > 0) setImmediate(drain);
  else draining = false;
}

function arm(ms: number, fire: () => void): Deadline {
  const deadline: Deadline = {
    cancelled: false,
    timeout: setTimeout(() => {
      due.push(() => {
        if (!deadline.cancelled) fire();
      });
      if (!draining) {
        draining = true;
        setImmediate(drain);
      }
    }, ms),
  };
  deadline.timeout.unref();
  return deadline;
}

function cancel(deadline: Deadline | undefined): void {
  if (!deadline) return;
  deadline.cancelled = true;
  clearTimeout(deadline.timeout);
}

function clear(timers: Timers): void {
  cancel(timers.headers);
  cancel(timers.request);
  timers.headers = undefined;
  timers.request = undefined;
}

function json408(error: GateError): string {
  const body = JSON.stringify({ error: { code: error.code, message: error.message } });
  return `HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/**
 * Header and request deadlines for web servers that are handed their connections ('connection')
 * instead of accepting them. Node arms its own (`headersTimeout`, `requestTimeout`) only when a
 * server emits 'listening': its sweep of the parsers runs from `setupConnectionsTracking`, an
 * internal reached through no public call, and never for HTTP/2. A partial request on a handed-over
 * connection was held as long as the client liked (issue 37). So each connection gets two plain
 * timers, armed when it starts and again after each answer (with the keep-alive allowance added),
 * cleared when its headers, and then its request, are complete:
 *
 * - HTTP/1.1 (plaintext, or over TLS without `h2`): per connection. Headers expire → a 408 with the
 *   code, then close; the request expires → 408 if no answer began, else close.
 * - HTTP/2 (TLS `h2`, h2c): the headers deadline is per session (until a stream has its headers,
 *   again once it has no stream left); the request deadline per stream (cancelled if the peer has
 *   not finished sending it). An h2 session with nothing open is thus closed like an idle
 *   keep-alive connection, at the keep-alive allowance plus the headers deadline.
 *
 * An upgraded connection (`Upgrade: websocket`) is no longer HTTP: its timers are cleared (a
 * CONNECT, which nobody here serves, Node closes itself). The deadlines can change (a reload): a
 * connection takes the new ones when it is next armed (its next request).
 */
export class RequestDeadlineWatch {
  private deadlines: RequestDeadlines;
  private readonly http1 = new WeakMap<Duplex, Http1Connection>();

  constructor(
    deadlines: RequestDeadlines,
    private readonly onExpired: DeadlineExpired = () => {},
  ) {
    this.deadlines = { ...deadlines };
  }

  /** New deadlines for connections that start (or finish a request) from now on. */
  use(deadlines: RequestDeadlines): void {
    this.deadlines = { ...deadlines };
  }

  /** A plaintext HTTP/1 server: each handed socket is one connection. */
  watchHttp1(server: HttpServer): void {
    server.on('connection', (socket: Duplex) => this.startHttp1(socket));
    this.watchHttp1Requests(server);
  }

  /** An h2c server: each session. */
  watchH2c(server: Http2Server): void {
    server.on('session', (session: Http2Session) => this.startH2(session));
  }

  /** The TLS server (h2 and http/1.1 by ALPN): the deadlines start once TLS is up. */
  watchSecure(server: Http2SecureServer): void {
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') this.startHttp1(socket);
    });
    server.on('session', (session: Http2Session) => this.startH2(session));
    this.watchHttp1Requests(server);
  }

  private startHttp1(socket: Duplex): void {
    const conn = new Http1Connection(socket, () => this.deadlines, this.onExpired);
    this.http1.set(socket, conn);
    conn.arm(0);
  }

  private watchHttp1Requests(server: HttpServer | Http2SecureServer): void {
    const emitter = server as unknown as NodeJS.EventEmitter;
    // 'request' comes for HTTP/2 streams too on the secure server; those have no entry here.
    // ('checkContinue' and 'connect' are left alone: a listener would change how Node answers them;
    // it still emits 'request' after its own 100 Continue, and closes a CONNECT itself.)
    emitter.on('request', (req: IncomingMessage, res: ServerResponse) => this.http1.get(req.socket)?.begin(req, res));
    emitter.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
      this.http1.get(req.socket)?.upgraded();
      // Node hands an upgrade over only when someone listens: if only this watch does, nobody
      // would ever answer it.
      if (emitter.listenerCount('upgrade') === 1) socket.destroy();
    });
  }

  private startH2(session: Http2Session): void {
    new H2Session(session, () => this.deadlines, this.onExpired).arm(0);
  }
}

class Http1Connection {
  private readonly timers: Timers = { headers: undefined, request: undefined };
  /** Requests whose headers came and whose answers have not finished (pipelining: more than one). */
  private readonly inFlight = new Map<IncomingMessage, ServerResponse>();
  private done = false;
  /** `bytesRead` when a keep-alive wait began: unchanged at the deadline means idle, not slow. */
  private idleMark: number | undefined;

  constructor(
    private readonly socket: Duplex,
    private readonly deadlines: () => RequestDeadlines,
    private readonly onExpired: DeadlineExpired,
  ) {
    socket.once('close', () => this.finish());
  }

  /** Arms both deadlines, counted from now plus `allowanceMs` (the keep-alive wait). */
  arm(allowanceMs: number): void {
    if (this.done) return;
    const d = this.deadlines();
    clear(this.timers);
    this.idleMark = allowanceMs > 0 ? bytesRead(this.socket) : undefined;
    this.timers.headers = arm(allowanceMs + d.headersTimeoutMs, () => {
      if (this.idleMark !== undefined && bytesRead(this.socket) === this.idleMark) {
        // Not a byte of a next request: an idle keep-alive connection, closed as Node closes one
        // (quietly), whichever of the two comes first.
        this.finish();
        this.socket.destroy();
        return;
      }
      this.expire(new GateError(ErrorCodes.WEB_HEADERS_TIMEOUT, `request headers not complete within ${d.headersTimeoutMs} ms`));
    });
    this.timers.request = arm(allowanceMs + d.requestTimeoutMs, () => {
      this.timers.request = undefined;
      // Every request in flight has all its bytes: what is left is the proxy's to answer.
      if (this.inFlight.size > 0 && [...this.inFlight.keys()].every((req) => req.complete)) return;
      this.expire(new GateError(ErrorCodes.WEB_REQUEST_TIMEOUT, `request not complete within ${d.requestTimeoutMs} ms`));
    });
  }

  /** A request's headers are complete: its body (or its answer) is what is left to wait for. */
  begin(req: IncomingMessage, res: ServerResponse): void {
    if (this.done) return;
    cancel(this.timers.headers);
    this.timers.headers = undefined;
    this.inFlight.set(req, res);
    res.once('finish', () => {
      this.inFlight.delete(req);
      if (this.inFlight.size === 0 && !this.socket.destroyed) this.arm(this.deadlines().keepAliveTimeoutMs);
    });
  }

  /** Upgraded (a WebSocket): no longer HTTP, so no longer this watch's. */
  upgraded(): void {
    this.finish();
  }

  private expire(error: GateError): void {
    if (this.done) return;
    this.finish();
    const socket = this.socket;
    this.onExpired(error, (socket as { remoteAddress?: string }).remoteAddress);
    if (socket.destroyed) return;
    // A 408 only where no answer has begun: anything else would land inside one.
    const answering = [...this.inFlight.values()].some((res) => res.headersSent);
    if (answering || !socket.writable) {
      socket.destroy();
      return;
    }
    const cut = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
    socket.once('close', () => clearTimeout(cut));
    socket.end(json408(error));
  }

  private finish(): void {
    this.done = true;
    clear(this.timers);
  }
}

/** Bytes the connection has received (net and TLS sockets count them even when node:http consumes the handle); undefined for other streams. */
function bytesRead(socket: Duplex): number | undefined {
  const n = (socket as { bytesRead?: unknown }).bytesRead;
  return typeof n === 'number' ? n : undefined;
}

/** `remoteClose`: the peer has sent END_STREAM (its request is complete). */
function requestComplete(stream: ServerHttp2Stream): boolean {
  const state = stream.state as { remoteClose?: number } | undefined;
  return stream.closed || stream.destroyed || (state?.remoteClose ?? 0) !== 0;
}

class H2Session {
  private headers: Deadline | undefined;
  private streams = 0;
  private done = false;

  constructor(
    private readonly session: Http2Session,
    private readonly deadlines: () => RequestDeadlines,
    private readonly onExpired: DeadlineExpired,
  ) {
    session.once('close', () => {
      this.done = true;
      cancel(this.headers);
    });
    session.on('stream', (stream: ServerHttp2Stream) => this.begin(stream));
  }

  arm(allowanceMs: number): void {
    if (this.done) return;
    cancel(this.headers);
    const d = this.deadlines();
    this.headers = arm(allowanceMs + d.headersTimeoutMs, () => {
      this.done = true;
      this.onExpired(
        new GateError(ErrorCodes.WEB_HEADERS_TIMEOUT, `no HTTP/2 request headers within ${d.headersTimeoutMs} ms`),
        this.session.socket?.remoteAddress,
      );
      this.session.destroy();
    });
  }

  private begin(stream: ServerHttp2Stream): void {
    cancel(this.headers);
    this.headers = undefined;
    this.streams++;
    const d = this.deadlines();
    const request = arm(d.requestTimeoutMs, () => {
      if (requestComplete(stream)) return;
      this.onExpired(
        new GateError(ErrorCodes.WEB_REQUEST_TIMEOUT, `HTTP/2 request not complete within ${d.requestTimeoutMs} ms`),
        this.session.socket?.remoteAddress,
      );
      stream.close(0x8); // CANCEL (RFC 9113 §7)
    });
    stream.once('close', () => {
      cancel(request);
      this.streams--;
      if (this.streams === 0 && !this.session.closed && !this.session.destroyed) this.arm(this.deadlines().keepAliveTimeoutMs);
    });
  }
}
