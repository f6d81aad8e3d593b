import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import {
  createSecureServer,
  createServer as createH2cServer,
  type Http2SecureServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
} from 'node:http2';
import { createSecureContext, type SecureContext, type Server as TlsServer } from 'node:tls';
import { WebErrorCodes } from '../web/routes.js';
import { type DeadlineExpired, type RequestDeadlines, RequestDeadlineWatch } from '../web/request-deadlines.js';
import type { ProxyCertificates } from './certificates.js';
import type { WebServers } from './route-handlers.js';

/**
 * One part of the proxy's web surface: answers the request and returns true, or returns false to
 * let the next one try. Both node:http's and http2's compatibility request/response fit.
 */
export type WebHandler = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => boolean;

/** The TLS contexts a certificate set makes: the default one and one per configured SNI name. */
export interface WebTls {
  /** Given to the secure server's `setSecureContext`: used when a client sends no SNI. */
  defaultOptions: { cert: string; key: string; ca: string };
  secureContext: SecureContext;
  sniContexts: ReadonlyMap<string, SecureContext>;
}

/**
 * Builds the contexts for `certificates`; throws (bad key, bad certificate) before anything is
 * swapped. Each context names the cluster CA: it verifies the client certificates agents renew with.
 */
export function webTlsFor(certificates: ProxyCertificates): WebTls {
  const ca = certificates.clusterCa.cert;
  const defaultOptions = { ...certificates.default, ca };
  return {
    defaultOptions,
    secureContext: createSecureContext(defaultOptions),
    sniContexts: new Map(Object.entries(certificates.bySni).map(([name, pair]) => [name, createSecureContext({ ...pair, ca })])),
  };
}

/**
 * The web endpoints the proxy answers itself, behind the routes that end in `serve`: one TLS
 * server (h2 and http/1.1 by ALPN, certificates chosen by SNI), one plaintext HTTP/1 server and one
 * h2c server, all asking the same ordered list of handlers. A request no handler takes gets a 404
 * with a stable code. Certificates change with `useTls`, which a reload calls after building them.
 */
export class WebFrontDoor {
  readonly servers: WebServers;
  private readonly handlers: WebHandler[] = [];
  private tls: WebTls;
  private readonly deadlines: RequestDeadlineWatch;

  /**
   * `handshakeTimeoutMs`: how long the secure server waits for a TLS handshake to complete. Node's
   * default gives a stalled one two minutes; the proxy passes its detection deadline, which bounds
   * the rest of an anonymous connection's first phase (read once, at start). `deadlines`: the
   * header and request deadlines of every connection the servers are handed (`useDeadlines`
   * changes them); `onExpired` hears of each one that expires.
   */
  constructor(tls: WebTls, options: { handshakeTimeoutMs?: number; deadlines: RequestDeadlines; onExpired?: DeadlineExpired }) {
    this.tls = tls;
    const onRequest = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
      for (const handler of this.handlers) if (handler(req, res)) return;
      const body = JSON.stringify({ error: { code: WebErrorCodes.NOT_FOUND, message: 'no such endpoint' } });
      res.statusCode = 404;
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Content-Length', Buffer.byteLength(body));
      res.end(body);
    };
    this.servers = {
      // A client certificate is asked for but never required: agents renew with theirs (verified
      // against the cluster CA, which each context names, so browsers holding no certificate from
      // it are not prompted); everyone else sends none and is served as before. The server does its
      // own TLS with SNICallback, so certificate reloads reach it through `this.tls`.
      secure: createSecureServer(
        {
          allowHTTP1: true,
          requestCert: true,
          rejectUnauthorized: false,
          ...(options.handshakeTimeoutMs === undefined ? {} : { handshakeTimeout: options.handshakeTimeoutMs }),
          SNICallback: (name, cb) => cb(null, this.tls.sniContexts.get(name.toLowerCase()) ?? this.tls.secureContext),
        },
        onRequest,
      ),
      http1: createHttpServer(onRequest),
      h2c: createH2cServer(onRequest),
    };
    // The secure server's HTTP/1 side has no keep-alive timeout of its own (http2 does not set
    // one): without it an idle keep-alive connection over TLS was held for ever.
    (this.servers.secure as unknown as { keepAliveTimeout: number }).keepAliveTimeout = options.deadlines.keepAliveTimeoutMs;
    (this.servers.http1 as HttpServer).keepAliveTimeout = options.deadlines.keepAliveTimeoutMs;
    this.deadlines = new RequestDeadlineWatch(options.deadlines, options.onExpired);
    this.deadlines.watchSecure(this.servers.secure as unknown as Http2SecureServer);
    this.deadlines.watchHttp1(this.servers.http1 as HttpServer);
    this.deadlines.watchH2c(this.servers.h2c as unknown as Http2Server);
    this.useTls(tls);
  }

  /** New header and request deadlines for connections that start (or finish a request) from now on. */
  useDeadlines(deadlines: RequestDeadlines): void {
    this.deadlines.use(deadlines);
  }

  /** Adds a handler after those added before: the first that takes a request answers it. */
  use(handler: WebHandler): void {
    this.handlers.push(handler);
  }

  /** New certificates for new TLS connections; established ones keep theirs. */
  useTls(tls: WebTls): void {
    this.tls = tls;
    // The default context, for clients that send no SNI (curl to an IP address).
    (this.servers.secure as TlsServer).setSecureContext(tls.defaultOptions);
  }
}
