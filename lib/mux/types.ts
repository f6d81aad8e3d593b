import type { Socket } from 'node:net';
import type { SecureContextOptions, TLSSocket } from 'node:tls';
import type { Server as HttpServer } from 'node:http';
import type { Http2Server, Http2SecureServer } from 'node:http2';
import type { Logger } from '../log.js';
import type { ProxyHeader } from '../proxy-protocol/header.js';

/** What detection found the client speaking. */
export type DetectedProtocol =
  | 'tls' // a TLS ClientHello
  | 'ssh'
  | 'http1'
  | 'h2'
  // Any Postgres client: a plaintext StartupMessage or CancelRequest, or an SSLRequest that
  // gate-mux answered 'S' followed by a TLS ClientHello (then `postgresSslRequest` is true and
  // SNI/ALPN are known, so routes may add TLS conditions).
  | 'postgres'
  | 'silent'; // the client sent nothing before the listener's silence timeout (server speaks first)

export interface Endpoint {
  address: string;
  port: number;
  family: string;
}

/** Everything known about a connection when it is handed to a handler. */
export interface ConnectionInfo {
  id: number;
  protocol: DetectedProtocol;
  /** Lower-cased SNI host name of the ClientHello, if any. */
  sni: string | undefined;
  /** ALPN protocols the client offered, in its preference order. */
  alpn: string[];
  /** ALPN the terminating handler negotiated (set by `terminate`). */
  negotiatedAlpn: string | undefined;
  /** The client: the PROXY header's source when one was accepted, else the socket peer. */
  remote: Endpoint;
  /** The listener address the client reached (the PROXY header's destination when accepted). */
  local: Endpoint;
  proxyHeader: ProxyHeader | undefined;
  /** True when the client sent a Postgres SSLRequest that gate-mux answered 'S' before its TLS. */
  postgresSslRequest: boolean;
  /** Name of the route that matched. */
  route: string;
  /** Size of the ClientHello handshake message, when TLS. */
  helloBytes: number | undefined;
}

export interface UpstreamAddress {
  host: string;
  port: number;
}

export type Handler = ForwardHandler | TerminateHandler | ServeHandler | CustomHandler | SelectHandler | WrapHandler;

/** Passes the connection through a stream adapter (framing, accounting) before `inner`. */
export interface WrapHandler {
  kind: 'wrap';
  wrap: (socket: import('node:stream').Duplex, info: ConnectionInfo) => import('node:stream').Duplex;
  inner: Handler;
}

/** Picks the handler per connection (e.g. terminate TLS only when a Postgres SSLRequest came first). */
export interface SelectHandler {
  kind: 'select';
  choose: (info: ConnectionInfo) => Handler;
}

export interface ForwardHandler {
  kind: 'forward';
  /** Where to dial: fixed, or chosen per connection. */
  to: UpstreamAddress | ((info: ConnectionInfo) => UpstreamAddress);
  /** Milliseconds allowed for the upstream TCP connect (default 10 s). */
  dialTimeoutMs?: number;
  /** Send a PROXY protocol header to the upstream on connect, before any client byte. */
  sendProxyHeader?: 'v1' | 'v2';
}

export interface TerminateHandler {
  kind: 'terminate';
  /** Certificates and TLS settings; `sniCertificates` picks a certificate per exact or `*.` SNI. */
  tls: SecureContextOptions & {
    sniCertificates?: Record<string, SecureContextOptions>;
    /** Server-side ALPN preference; the first one the client also offers is selected. */
    alpnProtocols?: string[];
    /**
     * Chooses the ALPN from the client's list instead (e.g. a versioned `gate-mysql-<v>`); return
     * undefined to refuse with no_application_protocol. Takes precedence over `alpnProtocols`.
     */
    selectAlpn?: (offered: string[], info: ConnectionInfo) => string | undefined;
    requestCert?: boolean;
    rejectUnauthorized?: boolean;
    /** Milliseconds for the TLS handshake (default 10 s). */
    handshakeTimeoutMs?: number;
  };
  /** Gets the cleartext stream. */
  inner: Handler;
}

export interface ServeHandler {
  kind: 'serve';
  /** Receives the socket through its 'connection' event (http, https, http2 or http2 secure server). */
  server: HttpServer | Http2Server | Http2SecureServer | import('node:net').Server;
}

export interface CustomHandler {
  kind: 'custom';
  handle: (socket: Socket | TLSSocket, info: ConnectionInfo) => void | Promise<void>;
}

/** Conditions a route matches on. Every condition given must hold. */
export interface RouteMatch {
  /** Exact SNI names or `*.suffix` wildcards (case-insensitive). */
  sni?: string | string[];
  /** SNI prefixes such as `kube-gate-proxy-alpn.`. */
  sniPrefix?: string | string[];
  /** ALPN protocols that must appear in the client's list (exact). */
  alpn?: string | string[];
  /** ALPN prefixes, e.g. `gate-mysql-` for versioned MySQL ALPN. */
  alpnPrefix?: string | string[];
  /**
   * Detected protocols. Without it, a route with SNI/ALPN conditions means ['tls', 'postgres'];
   * a route needs at least one condition.
   */
  protocol?: DetectedProtocol | DetectedProtocol[];
}

export interface Route {
  name: string;
  match: RouteMatch;
  handler: Handler;
}

export interface ListenOptions {
  host?: string;
  port: number;
  /** Route name for clients that send nothing for `silentAfterMs` (server-speaks-first protocols). */
  silentRoute?: string;
  /** Milliseconds of client silence before `silentRoute` is taken (default 3000). */
  silentAfterMs?: number;
  backlog?: number;
}

export interface MultiplexerOptions {
  routes: Route[];
  logger?: Logger;
  /** One deadline for the whole detection phase, PROXY header included (default 10000 ms). */
  detectTimeoutMs?: number;
  /** Idle timeout for routed connections, 0 for none (default 0). */
  idleTimeoutMs?: number;
  /** Maximum open connections; past it new ones are closed at once (default 0: unlimited). */
  maxConnections?: number;
  /**
   * Maximum open connections from one client address (default 0: unlimited); past it new ones
   * are closed with GATE_ERR_TOO_MANY_FROM_SOURCE. With PROXY protocol on, the address is the
   * header's source, counted as soon as the header is read (the load balancer's own address is
   * never counted, except for v2 LOCAL / UNKNOWN headers, which name no client).
   */
  maxConnectionsPerSource?: number;
  /** ClientHello handshake cap (default 16384). */
  maxHelloBytes?: number;
  /**
   * Relay `forward` routes on Node's bare libuv TCP handles instead of net.Socket: about half the
   * CPU per connection (BENCHMARKS.md). Default true; ignored (net.Socket) where this Node does
   * not offer the handles. Other handlers always get a net.Socket.
   */
  fastPath?: boolean;
  /** PROXY protocol: 'off' rejects headers; 'on' requires one from trusted networks (CIDRs). */
  proxyProtocol?: { mode: 'off' } | { mode: 'on'; trusted: string[] };
}
