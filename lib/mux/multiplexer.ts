import { performance } from 'node:perf_hooks';
import { createServer, type Socket, type AddressInfo, type Server } from 'node:net';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import type { CloseOptions, LifecycleState, Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { runHandler } from '../handlers/run.js';
import { TlsAlert, tlsAlertRecord } from '../tls/alert.js';
import { forwardOnHandles, type NativeRelayUse } from '../handlers/forward-handles.js';
import { HandleEnd, SocketEnd, StreamEnd, type ByteCounts, type ClientEnd } from '../transport/client-end.js';
import { Connection, type Part } from './connection.js';
import { bareClientHook, type WatchRelay } from '../handlers/bare-client.js';
import { errnoError, takeConnections, type TcpHandle } from '../transport/uv.js';
import { checkHandles } from '../transport/self-test.js';
import { applyProxyHeader, hasIdleTimeout, idleWatch, nativeRelayFor, reportFastPathOff } from './transport-choice.js';
import { Detector, type Detected } from './detector.js';
import { RouteTable } from './route-table.js';
import { Admission, overShare, tooManyFromSource } from './admission.js';
import { LogLimiter } from '../log-limiter.js';
import { Stats, type StatsSnapshot } from './stats.js';
import type { Endpoint } from '../handlers/types.js';
import type { ListenOptions, MultiplexerOptions, MultiplexerSettings, Route } from './types.js';
import { MUX_DEFAULTS, normalizeSettings, type NormalizedSettings } from './options.js';

const DEFAULT_SILENT_AFTER_MS = 3_000;
const DEFAULT_CLOSE_GRACE_MS = 10_000;
export const DEFAULT_MAX_HELLO_BYTES = MUX_DEFAULTS.maxHelloBytes;

interface Listener {
  server: Server;
  options: ListenOptions;
}

/**
 * One or more listeners that peek at each connection's first bytes (PROXY header, TLS
 * ClientHello, plaintext greeting), choose a route and hand the connection to its handler.
 */
export class Multiplexer implements Closable {
  private table: RouteTable;
  private readonly logger: Logger;
  private readonly counters = new Stats();
  private readonly listeners: Listener[] = [];
  private readonly connections = new Set<Connection>();
  /** Connections still detecting, oldest first: the ones shed at the cap. */
  private readonly undecided = new Set<Connection>();
  /** Who gets in: the cap, the per-source counts, PROXY-trusted sources, shedding (admission.ts). */
  private readonly admission: Admission;
  private readonly failureLog: LogLimiter;
  private nextId = 1;
  private closing: Promise<void> | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  /** Set once nothing is held any more (close() finished, or destroy()). */
  private released = false;
  private drained: (() => void) | undefined;

  /** What new connections get (setOptions replaces it whole); read through the getters below. */
  private settings: NormalizedSettings = normalizeSettings({});
  private useFastPath: boolean;
  /** Puts a new relay under the idle sweep; made once per idle timeout, undefined without one. */
  private watchRelay: WatchRelay | undefined = undefined;
  /**
   * The native relay when asked for and loaded (forward routes on handles only), with the idle
   * timeout it applies to connections handed over from now on.
   */
  private readonly native: NativeRelayUse | undefined;

  constructor(options: MultiplexerOptions) {
    this.table = new RouteTable(options.routes);
    this.logger = componentLogger(options.logger, 'mux');
    this.failureLog = new LogLimiter(this.logger, {
      ...(options.logBurst !== undefined ? { burst: options.logBurst } : {}),
      ...(options.logIntervalMs !== undefined ? { intervalMs: options.logIntervalMs } : {}),
    });
    if (options.fastPath !== undefined && typeof options.fastPath !== 'boolean') {
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, `fastPath: expected true or false, got ${JSON.stringify(options.fastPath)}`);
    }
    this.useFastPath = options.fastPath ?? true;
    this.admission = new Admission(this.logger, this.undecided);
    this.setOptions(options);
    this.native = nativeRelayFor(options, this.logger, this.idleTimeoutMs);
  }

  /** The detection deadline new connections get. */
  get detectTimeoutMs(): number {
    return this.settings.detectTimeoutMs;
  }

  /** The idle timeout routed connections get from now on (0: none). */
  get idleTimeoutMs(): number {
    return this.settings.idleTimeoutMs;
  }

  /** Open connections one client address may hold (0: no fixed cap). */
  get maxConnectionsPerSource(): number {
    return this.settings.maxConnectionsPerSource;
  }

  /** The ClientHello size past which a handshake is refused (GATE_ERR_HELLO_TOO_LARGE). */
  get maxHelloBytes(): number {
    return this.settings.maxHelloBytes;
  }

  /**
   * True when accepted connections start on bare libuv handles (transport/uv.ts). Asked for in
   * the options; the first listen() confirms it with the handles' self-test and turns it off
   * (logged once per process, with why) when the test fails or GATE_MUX_FAST_PATH=0.
   */
  get fastPath(): boolean {
    return this.useFastPath;
  }

  /** Open connections allowed right now (the budget's cap; shared when the budget is). */
  get maxConnections(): number {
    return this.admission.budget.cap;
  }

  /**
   * New limits and timeouts for new connections (a reload): detection deadline, idle timeout,
   * caps, PROXY protocol and its trusted networks. Connections already accepted keep the
   * deadline, trust and slot they started with; routed ones keep their idle timeout.
   * Options not given go back to their defaults, as in the constructor.
   */
  setOptions(options: MultiplexerSettings): void {
    const settings = normalizeSettings(options); // throws GATE_ERR_INVALID_ARGUMENT before any change
    this.admission.configure(options, settings.trusted);
    const idleChanged = settings.idleTimeoutMs !== this.settings.idleTimeoutMs;
    this.settings = settings;
    const idleTimeoutMs = settings.idleTimeoutMs;
    if (this.native) this.native.idleTimeoutMs = idleTimeoutMs;
    if (idleChanged || (idleTimeoutMs > 0 && !this.watchRelay)) {
      // A new sweep for relays routed from now on; relays in the old one stay there until they end.
      this.watchRelay = idleWatch(idleTimeoutMs);
    }
  }

  /** Replaces the routes: new connections follow them at once, established ones are untouched. */
  setRoutes(routes: Route[]): void {
    this.table = new RouteTable(routes);
  }

  get routes(): Route[] {
    return this.table.routes;
  }

  /** Starts a listener; may be called several times for several addresses. */
  async listen(options: ListenOptions): Promise<AddressInfo> {
    if (this.closing) throw new GateError(ErrorCodes.SHUTDOWN, 'multiplexer is closed');
    if (options.silentRoute !== undefined && !this.table.get(options.silentRoute)) {
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, `silentRoute '${options.silentRoute}' is not a route`);
    }
    if (this.useFastPath) {
      const check = await checkHandles();
      if (!check.ok) {
        this.useFastPath = false;
        reportFastPathOff(this.logger, check.reason);
      }
    }
    // allowHalfOpen: each direction ends on its own; noDelay: we relay, Nagle only adds latency.
    const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.acceptSocket(socket, options));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: options.host ?? '127.0.0.1', port: options.port, backlog: options.backlog ?? 511 }, () => {
        server.removeListener('error', reject);
        resolve();
      });
    });
    server.on('error', (err) => this.logger.error({ err }, 'listener error'));
    if (this.useFastPath) takeConnections(server, (handle) => this.acceptHandle(handle, options));
    this.listeners.push({ server, options });
    const address = server.address() as AddressInfo;
    // The cap always exists; say where it came from, so an operator knows what to raise.
    this.logger.info(
      { address: address.address, port: address.port, maxConnections: this.admission.budget.cap, capFrom: this.admission.capFrom },
      'listening',
    );
    return address;
  }

  /** Addresses of every listener. */
  addresses(): AddressInfo[] {
    return this.listeners.map((l) => l.server.address() as AddressInfo);
  }

  stats(): StatsSnapshot {
    return this.counters.snapshot();
  }

  /** True while every listener started here accepts connections (false before the first, and from close() on). */
  get listening(): boolean {
    return this.closing === undefined && this.listeners.length > 0 && this.listeners.every((l) => l.server.listening);
  }

  /** Open connections right now (detecting or routed). */
  get openConnections(): number {
    return this.connections.size;
  }

  /** open, closing (not accepting, connections finishing), closed (every listener, connection and timer gone). */
  get state(): LifecycleState {
    if (this.released) return 'closed';
    return this.closing === undefined ? 'open' : 'closing';
  }

  /**
   * Stops accepting, lets open connections finish for `graceMs` (default 10 s), then destroys
   * what is left. Resolves when every listener, connection and timer is gone; a second call
   * returns the same promise.
   */
  close(options: CloseOptions = {}): Promise<void> {
    if (this.closing) return this.closing;
    const graceMs = options.graceMs ?? DEFAULT_CLOSE_GRACE_MS;
    const listenersClosed = Promise.all(this.listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve()))));
    const drained = new Promise<void>((resolve) => {
      this.drained = resolve;
      if (this.connections.size === 0) resolve();
    });
    const forced = new Promise<void>((resolve) => {
      this.graceTimer = setTimeout(() => {
        for (const conn of this.connections) conn.fail(new GateError(ErrorCodes.SHUTDOWN, 'shutdown grace period over'));
        resolve();
      }, graceMs);
    });
    this.closing = Promise.all([listenersClosed, Promise.race([drained, forced.then(() => drained)])]).then(() => {
      clearTimeout(this.graceTimer);
      this.failureLog.flush(); // the counts of lines held back, and no timer left behind
      this.released = true;
    });
    return this.closing;
  }

  /** Stops accepting and fails every open connection now with `err` (default GATE_ERR_SHUTDOWN). */
  destroy(err: GateError = new GateError(ErrorCodes.SHUTDOWN, 'multiplexer destroyed')): void {
    if (this.released) return;
    this.released = true;
    clearTimeout(this.graceTimer);
    if (this.closing === undefined) {
      for (const l of this.listeners) l.server.close();
      this.closing = Promise.resolve();
    }
    for (const conn of this.connections) conn.fail(err);
    this.failureLog.flush();
  }

  /**
   * Closes a connection at accept, before a byte is read: no TLS alert, since nothing says the
   * client speaks TLS (an SSH, HTTP or MySQL client would read the record as garbage), and
   * reading its first bytes to find out would hold the slot the refusal is meant to spare.
   */
  private reject(client: ClientEnd, error: GateError): undefined {
    this.counters.rejected++;
    this.counters.failure(error.code);
    this.failureLog.log('info', error.code, { remote: client.remote.address, code: error.code }, error.message);
    client.destroy();
    return undefined;
  }

  private acceptHandle(handle: TcpHandle, listener: ListenOptions): void {
    handle.setNoDelay(true); // we relay: Nagle would only add latency
    let conn: Connection | undefined;
    const client: HandleEnd = new HandleEnd(handle, (error) => {
      if (conn === undefined) return;
      if (error !== undefined) conn.recordError(errnoError(error));
      conn.closed(client);
    });
    conn = this.admit(client, client, listener, true);
  }

  private acceptSocket(socket: Socket, listener: ListenOptions): void {
    socket.on('error', () => {}); // reported through the connection once adopted; never crash
    this.admit(new SocketEnd(socket), socket, listener, true);
  }

  /**
   * Takes a connection that did not arrive on a listener of this multiplexer — a byte stream
   * carried inside something else, such as the binary messages of a WebSocket connection upgrade
   * (lib/conn-upgrade) — and runs it through the same path as an accepted socket: the cap and
   * the per-source count (against `remote`), the detection deadline, routing, the handler, the
   * idle timeout (when the stream has `setTimeout(ms, onTimeout)`, as net.Socket does), one log
   * line and the counters. It never expects a PROXY header: whoever carried the stream already
   * decided who the client is. Returns false when the stream was refused at once (closing, at a
   * cap): it has been destroyed, and the refusal counted and logged with its code.
   */
  accept(stream: Duplex & Partial<ByteCounts>, endpoints: { remote: Endpoint; local: Endpoint }): boolean {
    stream.on('error', () => {}); // reported through the connection once adopted; never crash
    return this.admit(new StreamEnd(stream, endpoints.remote, endpoints.local), stream, CARRIED, false) !== undefined;
  }

  /**
   * `fromListener`: the client came in on one of our listeners, so with PROXY protocol on it must
   * be a trusted balancer and send a header; a carried stream was vouched for by its carrier.
   */
  private admit(client: ClientEnd, part: Part, listener: ListenOptions, fromListener: boolean): Connection | undefined {
    this.counters.accepted++;
    if (this.closing) return this.reject(client, new GateError(ErrorCodes.SHUTDOWN, 'shutting down'));
    // No peer address: the client reset the connection before we got to it (the kernel no
    // longer knows the peer). Counted as what it is, not as an untrusted or over-limit source.
    const { address } = client.remote;
    if (address === '') return this.reject(client, new GateError(ErrorCodes.CLIENT_CLOSED, 'client was gone before it was accepted'));
    const admitted = this.admission.check(client, fromListener, this.maxConnectionsPerSource);
    if (admitted instanceof GateError) return this.reject(client, admitted);
    const { expectHeader, source } = admitted;
    const conn = new Connection(this.nextId++, client, part, this.logger, (c) => this.finished(c));
    this.admission.take(conn, source);
    this.connections.add(conn);
    this.counters.open++;
    this.detect(conn, listener, expectHeader);
    return conn;
  }

  private detect(conn: Connection, listener: ListenOptions, expectHeader: boolean): void {
    const client = conn.clientEnd;
    const detector = new Detector({ maxHelloBytes: this.maxHelloBytes, proxyHeader: expectHeader ? 'required' : 'refused' });
    const silentRoute = listener.silentRoute;
    const silentAfterMs = listener.silentAfterMs ?? DEFAULT_SILENT_AFTER_MS;
    const detectTimeoutMs = this.detectTimeoutMs;
    // For the detection-time histogram: one clock read here and one at the decision, no allocation.
    const started = performance.now();
    let sawBytes = false;
    const stop = (): void => {
      conn.stopDetection = undefined;
      this.undecided.delete(conn);
      clearTimeout(deadline);
      clearTimeout(silence);
      client.stopReading();
    };
    const fail = (error: GateError, alert?: number): void => {
      conn.stage = detector.stage;
      stop();
      conn.error = error;
      if (alert !== undefined) client.closeAfter(tlsAlertRecord(alert));
      else client.destroy();
    };
    let headerApplied = false;
    const data = (chunk: Buffer): void => {
      sawBytes = true;
      clearTimeout(silence);
      const step = detector.feed(chunk);
      const header = detector.acceptedProxyHeader;
      if (header && !headerApplied) {
        // The header's client is the connection's client from now on, also for a detection
        // failure that follows (its log line must name the real client, not the load balancer).
        headerApplied = true;
        applyProxyHeader(conn.info, header);
        // v2 LOCAL / UNKNOWN name no client: the balancer's own connection counts as its own.
        const source = header.source?.address ?? client.remote.address;
        const slot = conn.slot;
        if (slot) {
          const max = this.maxConnectionsPerSource;
          if (max > 0 && slot.sources.count(source) >= max) return fail(tooManyFromSource(source, max));
          if (!slot.admitSource(client, source)) return fail(overShare(source, slot));
        }
      }
      if ('reply' in step && step.reply) client.write(step.reply);
      if (step.status === 'need') return;
      if (step.status === 'failed') return fail(step.error, step.alert);
      stop();
      this.counters.detectTime(performance.now() - started);
      this.route(conn, step.detected);
    };
    const deadline = setTimeout(() => {
      fail(new GateError(ErrorCodes.DETECT_TIMEOUT, `no routing decision within ${detectTimeoutMs} ms (${detector.held} bytes held)`));
    }, detectTimeoutMs);
    let silence: NodeJS.Timeout | undefined;
    if (silentRoute !== undefined) {
      const goSilent = (): void => {
        if (sawBytes || conn.stopDetection === undefined) return;
        stop();
        this.counters.detectTime(performance.now() - started);
        this.route(
          conn,
          { protocol: 'silent', hello: undefined, proxyHeader: undefined, postgresSslRequest: false, rest: Buffer.alloc(0) },
          silentRoute,
        );
      };
      if (silentAfterMs <= 0) {
        // Server-speaks-first port: hand over at once, the client will not talk first.
        setImmediate(goSilent);
      } else silence = setTimeout(goSilent, silentAfterMs);
    }
    // The listener allows half-open sockets, so a client FIN alone does not close anything: a
    // client that ends before detection is done can never complete it, and would otherwise hold
    // its slot (and its per-source count) until the deadline.
    const end = (): void => {
      fail(new GateError(ErrorCodes.CLIENT_CLOSED, `client ended the connection during detection (${detector.held} bytes held)`));
    };
    // Without an error: the connection ended first (stop the timers). With one: shed under
    // pressure; a client in the middle of a ClientHello is known to speak TLS and gets an alert.
    conn.stopDetection = (error?: GateError): void => {
      if (error) return fail(error, detector.stage === 'tls-partial' ? TlsAlert.internalError : undefined);
      conn.stage = detector.stage;
      stop();
    };
    this.undecided.add(conn);
    client.read({ data, end });
  }

  private route(conn: Connection, detected: Detected, routeName?: string): void {
    const { info } = conn;
    const client = conn.clientEnd;
    info.protocol = detected.protocol;
    info.postgresSslRequest = detected.postgresSslRequest;
    if (detected.hello) {
      info.sni = detected.hello.sni;
      info.alpn = detected.hello.alpn;
      info.helloBytes = detected.hello.handshakeLength;
      this.counters.helloSize(detected.hello.handshakeLength);
    }
    if (detected.proxyHeader) applyProxyHeader(info, detected.proxyHeader);
    this.counters.protocol(detected.protocol);
    const route = routeName !== undefined ? this.table.get(routeName) : this.table.select(info);
    if (!route) {
      const error = new GateError(ErrorCodes.NO_ROUTE, `no route for ${describe(info)}`);
      conn.error = error;
      // Fail closed with a TLS alert rather than a bare reset: the client can tell "no such
      // service" from a network fault (docs/ARCHITECTURE.md, "Fail closed").
      if (detected.hello)
        client.closeAfter(tlsAlertRecord(info.alpn.length > 0 ? TlsAlert.noApplicationProtocol : TlsAlert.unrecognizedName));
      else client.destroy();
      return;
    }
    conn.markRouted(route.name);
    const counters = this.counters.route(route.name);
    counters.connections++;
    counters.open++;
    let handler = route.handler;
    while (handler.kind === 'select') handler = handler.choose(info);
    // Raw passthrough runs on the bare handles; a Postgres SSLRequest to replay, and every other
    // handler, get the client as a net.Socket.
    if (client instanceof HandleEnd && handler.kind === 'forward' && !info.postgresSslRequest) {
      forwardOnHandles(client, detected.rest, handler, conn, this.watchRelay, this.native);
      return;
    }
    // The tunnel handler takes a passthrough client on its handle too (handlers/bare-client.ts).
    const bare = client instanceof HandleEnd && !info.postgresSslRequest ? bareClientHook(handler) : undefined;
    if (bare) {
      bare(client as HandleEnd, detected.rest, conn, this.watchRelay);
      return;
    }
    let socket: Duplex;
    if (client instanceof HandleEnd) {
      const made = client.toSocket(detected.rest);
      conn.handOver(made, made);
      socket = made;
    } else socket = client.toSocket(detected.rest);
    if (this.idleTimeoutMs > 0 && hasIdleTimeout(socket)) {
      socket.setTimeout(this.idleTimeoutMs, () => conn.fail(new GateError(ErrorCodes.IDLE_TIMEOUT, `idle for ${this.idleTimeoutMs} ms`)));
    }
    runHandler(socket, handler, conn);
  }

  private finished(conn: Connection): void {
    conn.stopDetection?.();
    this.connections.delete(conn);
    this.admission.releaseSlot(conn);
    this.counters.open--;
    const { info, error } = conn;
    conn.idleSweep?.delete(conn.counts);
    const bytesIn = conn.counts.bytesRead;
    const bytesOut = conn.counts.bytesWritten;
    if (conn.routed) {
      const counters = this.counters.route(info.route);
      counters.open--;
      counters.bytesIn += bytesIn;
      counters.bytesOut += bytesOut;
      if (error) counters.errors++;
    }
    if (error) {
      this.counters.failure(error.code);
      // An undecided connection is labelled by how far it got ('tls-partial': part of a TLS record
      // and no more), not by the 'silent' placeholder of a protocol never detected.
      this.failureLog.log(
        'warn',
        error.code,
        {
          conn: info.id,
          remote: info.remote.address,
          route: info.route || undefined,
          protocol: conn.stage ?? info.protocol,
          sni: info.sni,
          code: error.code,
          bytesIn,
          bytesOut,
        },
        error.message,
      );
    }
    if (this.closing && this.connections.size === 0) this.drained?.();
  }
}

/** The listener settings of a carried stream (Multiplexer.accept): no silence route, nothing to bind. */
const CARRIED: ListenOptions = { port: 0 };

function describe(info: { protocol: string; sni: string | undefined; alpn: string[] }): string {
  return info.protocol === 'tls' ? `TLS sni=${info.sni ?? '(none)'} alpn=[${info.alpn.join(',')}]` : info.protocol;
}
