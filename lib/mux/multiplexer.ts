import { BlockList, createServer, isIPv6, type AddressInfo, type Server, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { runHandler } from '../handlers/run.js';
import { TlsAlert, tlsAlertRecord } from '../tls/alert.js';
import { forwardOnHandles, type NativeRelayUse } from '../handlers/forward-handles.js';
import { HandleEnd, SocketEnd, type ClientEnd } from '../transport/client-end.js';
import { Connection, type Part } from './connection.js';
import { HandleRelay } from '../transport/handle-relay.js';
import { IdleSweep } from '../transport/idle-sweep.js';
import { errnoError, takeConnections, type TcpHandle } from '../transport/uv.js';
import { checkHandles } from '../transport/self-test.js';
import { loadNativeRelay, NATIVE_RELAY_ENV } from '../transport/native-relay.js';
import { Detector, type Detected } from './detector.js';
import { RouteTable } from './route-table.js';
import { SourceLimiter } from './source-limit.js';
import { Stats, type StatsSnapshot } from './stats.js';
import type { ProxyHeader } from '../proxy-protocol/header.js';
import type { ConnectionInfo } from '../handlers/types.js';
import type { ConnectionParts } from '../handlers/context.js';
import type { ListenOptions, MultiplexerOptions, Route } from './types.js';

const DEFAULT_DETECT_TIMEOUT_MS = 10_000;
const DEFAULT_SILENT_AFTER_MS = 3_000;
const DEFAULT_CLOSE_GRACE_MS = 10_000;
export const DEFAULT_MAX_HELLO_BYTES = 16_384;

interface Listener {
  server: Server;
  options: ListenOptions;
}

/** Builds a BlockList of trusted PROXY-header sources from CIDRs and single addresses. */
function trustList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of cidrs) {
    const [address = '', bits] = entry.split('/');
    const type = isIPv6(address) ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

/**
 * One or more listeners that peek at each connection's first bytes (PROXY header, TLS
 * ClientHello, plaintext greeting), choose a route and hand the connection to its handler.
 */
export class Multiplexer {
  private table: RouteTable;
  private readonly logger: Logger;
  private readonly counters = new Stats();
  private readonly listeners: Listener[] = [];
  private readonly connections = new Set<Connection>();
  private readonly trusted: BlockList | undefined;
  private readonly perSource: SourceLimiter;
  private nextId = 1;
  private closing: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  readonly detectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxConnectionsPerSource: number;
  readonly maxHelloBytes: number;
  /**
   * True when accepted connections start on bare libuv handles (transport/uv.ts). Asked for in
   * the options; the first listen() confirms it with the handles' self-test and turns it off
   * (logged once per process, with why) when the test fails or GATE_MUX_FAST_PATH=0.
   */
  fastPath: boolean;
  private readonly idle: IdleSweep<HandleRelay> | undefined;
  /** The native relay when asked for and loaded (forward routes on handles only). */
  private readonly native: NativeRelayUse | undefined;
  /** Puts a new relay under the idle sweep; made once, undefined without an idle timeout. */
  private readonly watchRelay: ((relay: HandleRelay, conn: ConnectionParts) => void) | undefined;

  constructor(options: MultiplexerOptions) {
    this.table = new RouteTable(options.routes);
    this.logger = componentLogger(options.logger, 'mux');
    this.detectTimeoutMs = options.detectTimeoutMs ?? DEFAULT_DETECT_TIMEOUT_MS;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 0;
    this.maxConnections = options.maxConnections ?? 0;
    this.maxHelloBytes = options.maxHelloBytes ?? DEFAULT_MAX_HELLO_BYTES;
    this.maxConnectionsPerSource = options.maxConnectionsPerSource ?? 0;
    this.perSource = new SourceLimiter(this.maxConnectionsPerSource);
    this.fastPath = options.fastPath ?? true;
    this.native = (options.nativeRelay ?? nativeRelayAskedFor()) ? nativeRelayUse(this.logger, this.idleTimeoutMs) : undefined;
    const idle = this.idleTimeoutMs > 0 ? new IdleSweep<HandleRelay>(this.idleTimeoutMs) : undefined;
    this.idle = idle;
    this.watchRelay = idle
      ? (relay, conn) => idle.add(relay, () => conn.fail(new GateError(ErrorCodes.IDLE_TIMEOUT, `idle for ${this.idleTimeoutMs} ms`)))
      : undefined;
    const pp = options.proxyProtocol ?? { mode: 'off' };
    this.trusted = pp.mode === 'on' ? trustList(pp.trusted) : undefined;
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
      throw new GateError(ErrorCodes.CONFIG_INVALID, `silentRoute '${options.silentRoute}' is not a route`);
    }
    if (this.fastPath) {
      const check = await checkHandles();
      if (!check.ok) {
        this.fastPath = false;
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
    if (this.fastPath) takeConnections(server, (handle) => this.acceptHandle(handle, options));
    this.listeners.push({ server, options });
    const address = server.address() as AddressInfo;
    this.logger.info({ address: address.address, port: address.port }, 'listening');
    return address;
  }

  /** Addresses of every listener. */
  addresses(): AddressInfo[] {
    return this.listeners.map((l) => l.server.address() as AddressInfo);
  }

  stats(): StatsSnapshot {
    return this.counters.snapshot();
  }

  /** Open connections right now (detecting or routed). */
  get openConnections(): number {
    return this.connections.size;
  }

  /**
   * Stops accepting, lets open connections finish for `graceMs`, then destroys what is left.
   * Resolves when every listener, connection and timer is gone.
   */
  close(options: { graceMs?: number } = {}): Promise<void> {
    if (this.closing) return this.closing;
    const graceMs = options.graceMs ?? DEFAULT_CLOSE_GRACE_MS;
    const listenersClosed = Promise.all(this.listeners.map((l) => new Promise<void>((resolve) => l.server.close(() => resolve()))));
    const drained = new Promise<void>((resolve) => {
      this.drained = resolve;
      if (this.connections.size === 0) resolve();
    });
    let timer: NodeJS.Timeout | undefined;
    const forced = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        for (const conn of this.connections) conn.fail(new GateError(ErrorCodes.SHUTDOWN, 'shutdown grace period over'));
        resolve();
      }, graceMs);
    });
    this.closing = Promise.all([listenersClosed, Promise.race([drained, forced.then(() => drained)])]).then(() => {
      clearTimeout(timer);
    });
    return this.closing;
  }

  private reject(client: ClientEnd, error: GateError): undefined {
    this.counters.rejected++;
    this.counters.failure(error.code);
    this.logger.info({ remote: client.remote.address, code: error.code }, error.message);
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
    conn = this.accept(client, client, listener);
  }

  private acceptSocket(socket: Socket, listener: ListenOptions): void {
    socket.on('error', () => {}); // reported through the connection once adopted; never crash
    this.accept(new SocketEnd(socket), socket, listener);
  }

  private accept(client: ClientEnd, part: Part, listener: ListenOptions): Connection | undefined {
    this.counters.accepted++;
    if (this.closing) return this.reject(client, new GateError(ErrorCodes.SHUTDOWN, 'shutting down'));
    if (this.maxConnections > 0 && this.connections.size >= this.maxConnections) {
      return this.reject(client, new GateError(ErrorCodes.TOO_MANY_CONNECTIONS, `over ${this.maxConnections} open connections`));
    }
    // No peer address: the client reset the connection before we got to it (the kernel no
    // longer knows the peer). Counted as what it is, not as an untrusted or over-limit source.
    if (client.remote.address === '') return this.reject(client, new GateError(ErrorCodes.CLIENT_CLOSED, 'client was gone before it was accepted'));
    if (this.trusted) {
      const { address, family } = client.remote;
      if (!this.trusted.check(address, family === 'IPv6' ? 'ipv6' : 'ipv4')) {
        return this.reject(client, new GateError(ErrorCodes.PROXY_HEADER_REFUSED, 'source not trusted to send PROXY headers'));
      }
    }
    // Behind a PROXY-speaking load balancer every socket comes from the balancer: the client is
    // only known once the header is read (detect), so it is counted there instead.
    if (!this.trusted && !this.perSource.admit(client, client.remote.address)) {
      return this.reject(client, tooManyFromSource(client.remote.address, this.maxConnectionsPerSource));
    }
    const conn = new Connection(this.nextId++, client, part, this.logger, (c) => this.finished(c));
    this.connections.add(conn);
    this.counters.open++;
    this.detect(conn, listener);
    return conn;
  }

  private detect(conn: Connection, listener: ListenOptions): void {
    const client = conn.clientEnd;
    const detector = new Detector({ maxHelloBytes: this.maxHelloBytes, proxyHeader: this.trusted ? 'required' : 'refused' });
    const silentRoute = listener.silentRoute;
    const silentAfterMs = listener.silentAfterMs ?? DEFAULT_SILENT_AFTER_MS;
    let sawBytes = false;
    const stop = (): void => {
      conn.stopDetection = undefined;
      clearTimeout(deadline);
      clearTimeout(silence);
      client.stopReading();
    };
    const fail = (error: GateError, alert?: number): void => {
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
        if (!this.perSource.admit(client, source)) return fail(tooManyFromSource(source, this.maxConnectionsPerSource));
      }
      if ('reply' in step && step.reply) client.write(step.reply);
      if (step.status === 'need') return;
      if (step.status === 'failed') return fail(step.error, step.alert);
      stop();
      this.route(conn, step.detected);
    };
    const deadline = setTimeout(() => {
      fail(new GateError(ErrorCodes.DETECT_TIMEOUT, `no routing decision within ${this.detectTimeoutMs} ms (${detector.held} bytes held)`));
    }, this.detectTimeoutMs);
    let silence: NodeJS.Timeout | undefined;
    if (silentRoute !== undefined) {
      const goSilent = (): void => {
        if (sawBytes || conn.stopDetection === undefined) return;
        stop();
        this.route(conn, { protocol: 'silent', hello: undefined, proxyHeader: undefined, postgresSslRequest: false, rest: Buffer.alloc(0) }, silentRoute);
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
    conn.stopDetection = stop;
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
      if (detected.hello) client.closeAfter(tlsAlertRecord(info.alpn.length > 0 ? TlsAlert.noApplicationProtocol : TlsAlert.unrecognizedName));
      else client.destroy();
      return;
    }
    info.route = route.name;
    conn.routed = true;
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
    const socket = client.toSocket(detected.rest);
    if (client instanceof HandleEnd) conn.handOver(socket, socket);
    if (this.idleTimeoutMs > 0) {
      socket.setTimeout(this.idleTimeoutMs, () => conn.fail(new GateError(ErrorCodes.IDLE_TIMEOUT, `idle for ${this.idleTimeoutMs} ms`)));
    }
    runHandler(socket, handler, conn);
  }

  private finished(conn: Connection): void {
    conn.stopDetection?.();
    this.connections.delete(conn);
    this.perSource.release(conn.clientEnd);
    this.counters.open--;
    const { info, error } = conn;
    if (conn.counts instanceof HandleRelay) this.idle?.delete(conn.counts);
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
      this.logger.warn(
        { conn: info.id, remote: info.remote.address, route: info.route || undefined, protocol: info.protocol, sni: info.sni, code: error.code, bytesIn, bytesOut },
        error.message,
      );
    }
    if (this.closing && this.connections.size === 0) this.drained?.();
  }
}

/**
 * A PROXY header's endpoints replace the socket's. v2 LOCAL and v1 UNKNOWN / v2 AF_UNSPEC carry
 * no addresses: the connection's own addresses stand (proxy-protocol.txt §2.2).
 */
function applyProxyHeader(info: ConnectionInfo, header: ProxyHeader): void {
  info.proxyHeader = header;
  const { source, destination } = header;
  if (source) info.remote = { address: source.address, port: source.port, family: source.family };
  if (destination) info.local = { address: destination.address, port: destination.port, family: destination.family };
}

function tooManyFromSource(address: string, max: number): GateError {
  return new GateError(ErrorCodes.TOO_MANY_FROM_SOURCE, `over ${max} open connections from ${address}`);
}

function describe(info: { protocol: string; sni: string | undefined; alpn: string[] }): string {
  return info.protocol === 'tls' ? `TLS sni=${info.sni ?? '(none)'} alpn=[${info.alpn.join(',')}]` : info.protocol;
}

let fastPathOffReported = false;

/** Once per process: every multiplexer shares the one self-test, so one line says why. */
function reportFastPathOff(logger: Logger, reason: string): void {
  if (fastPathOffReported) return;
  fastPathOffReported = true;
  logger.warn({ reason }, 'passthrough runs on net.Socket (bare-handle fast path off)');
}

function nativeRelayAskedFor(): boolean {
  const value = process.env[NATIVE_RELAY_ENV]?.trim().toLowerCase();
  return value === '1' || value === 'on' || value === 'true';
}

let nativeOffReported = false;

function nativeRelayUse(logger: Logger, idleTimeoutMs: number): NativeRelayUse | undefined {
  const load = loadNativeRelay();
  if (load.ok) return { relay: load.relay, idleTimeoutMs };
  if (!nativeOffReported) {
    nativeOffReported = true;
    logger.warn({ reason: load.reason }, 'native relay off: forward routes relay in TypeScript');
  }
  return undefined;
}
