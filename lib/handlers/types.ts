/**
 * The handler contract: what a route's handler is (forward, terminate, serve, custom, select, wrap)
 * and what it is told about the connection. The multiplexer builds on these; nothing here knows it.
 */
import type { LookupFunction, Server as NetServer, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { SecureContextOptions, TLSSocket } from 'node:tls';
import type { Server as HttpServer } from 'node:http';
import type { Http2Server, Http2SecureServer } from 'node:http2';
import type { ProxyHeader } from '../proxy-protocol/header.js';
import type { Endpoint } from '../transport/endpoint.js';
import type { RefusalProtocol } from '../refusals/protocols.js';

// Named by ForwardHandler's `refusal`, so it is public with it (gate-mux/mux).
export type { RefusalProtocol };

export type { Endpoint };

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
  wrap: (socket: Duplex, info: ConnectionInfo) => Duplex;
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
  /**
   * Resolves a host name upstream, as net.connect's `lookup` option (default dns.lookup): called
   * with `{ all: true }`, every address it gives is tried, Happy Eyeballs style (RFC 8305).
   */
  lookup?: LookupFunction;
  /**
   * The protocol a client whose upstream cannot be dialled (refused, unreachable, timed out) is told
   * why in (handlers/refuse.ts): `postgres`, `mysql`, `redis`, `mongodb`, `ssh`, `http`, or `none`
   * for a bare close. Default: what the connection shows (its negotiated ALPN, its plaintext
   * greeting). Never said inside TLS the proxy did not end, nor by the native relay (which dials
   * on its own thread): those close as before.
   */
  refusal?: RefusalProtocol | 'none';
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
  server: HttpServer | Http2Server | Http2SecureServer | NetServer;
}

export interface CustomHandler {
  kind: 'custom';
  handle: (socket: Socket | TLSSocket, info: ConnectionInfo) => void | Promise<void>;
}
