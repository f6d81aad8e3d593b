import { createSecureContext, TLSSocket, type SecureContext, type SecureContextOptions, type TLSSocketOptions } from 'node:tls';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import type { TerminateHandler } from './types.js';
import type { HandlerContext } from './context.js';

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * The secure contexts of one terminate handler, built once (building a context parses keys and
 * certificates: far too slow per connection) and chosen per SNI: exact name, then the longest
 * `*.suffix`, then the handler's default.
 */
export class CertificateSelector {
  readonly defaultContext: SecureContext;
  private readonly exact = new Map<string, SecureContext>();
  private readonly wildcards: Array<[suffix: string, context: SecureContext]> = [];

  constructor(tls: TerminateHandler['tls']) {
    const {
      sniCertificates,
      alpnProtocols: _a,
      selectAlpn: _s,
      requestCert: _r,
      rejectUnauthorized: _u,
      handshakeTimeoutMs: _h,
      ...base
    } = tls;
    this.defaultContext = createSecureContext(base);
    for (const [name, options] of Object.entries(sniCertificates ?? {})) {
      const context = createSecureContext({ ...base, ...options } as SecureContextOptions);
      const lower = name.toLowerCase();
      if (lower.startsWith('*.')) this.wildcards.push([lower.slice(1), context]);
      else this.exact.set(lower, context);
    }
    this.wildcards.sort((a, b) => b[0].length - a[0].length);
  }

  select(servername: string | undefined): SecureContext {
    if (!servername) return this.defaultContext;
    const lower = servername.toLowerCase();
    const hit = this.exact.get(lower);
    if (hit) return hit;
    for (const [suffix, context] of this.wildcards) if (lower.endsWith(suffix)) return context;
    return this.defaultContext;
  }
}

function alpnOptions(tls: TerminateHandler['tls'], ctx: HandlerContext): Pick<TLSSocketOptions, 'ALPNProtocols' | 'ALPNCallback'> {
  const { selectAlpn } = tls;
  if (selectAlpn) return { ALPNCallback: ({ protocols }) => selectAlpn(protocols, ctx.info) };
  return tls.alpnProtocols ? { ALPNProtocols: tls.alpnProtocols } : {};
}

const selectors = new WeakMap<TerminateHandler, CertificateSelector>();

function selectorFor(handler: TerminateHandler): CertificateSelector {
  let selector = selectors.get(handler);
  if (!selector) {
    selector = new CertificateSelector(handler.tls);
    selectors.set(handler, selector);
  }
  return selector;
}

/**
 * Why the client's certificate is not acceptable, or undefined when it verified. tls.Server
 * computes `authorized` in its own 'secure' listener (Node lib/_tls_wrap.js onServerSocketSecure,
 * from the handle's verifyError()); a TLSSocket built by hand never does, so `authorized` stays
 * false for every client. We ask the handle the same way, and fail closed if we cannot.
 */
function clientCertificateProblem(socket: TLSSocket): string | undefined {
  const handle = (socket as unknown as { _handle?: { verifyError?: () => Error | null } })._handle;
  if (typeof handle?.verifyError !== 'function') return 'cannot verify the client certificate (no TLS handle)';
  const error = handle.verifyError();
  if (error) return (error as NodeJS.ErrnoException).code ?? error.message;
  const peer = socket.getPeerCertificate();
  if (!peer || Object.keys(peer).length === 0) return 'no client certificate';
  return undefined;
}

/**
 * Ends TLS here and hands the cleartext TLSSocket to `next`. The peeked ClientHello bytes sit in
 * the socket's read buffer; TLSSocket feeds them to OpenSSL on its first read.
 */
export function runTerminate(client: Duplex, handler: TerminateHandler, ctx: HandlerContext, next: (socket: TLSSocket) => void): void {
  const selector = selectorFor(handler);
  const { tls } = handler;
  const tlsSocket = new TLSSocket(client, {
    isServer: true,
    secureContext: selector.select(ctx.info.sni),
    SNICallback: (servername, cb) => cb(null, selector.select(servername)),
    ...alpnOptions(tls, ctx),
    requestCert: tls.requestCert ?? false,
    rejectUnauthorized: tls.rejectUnauthorized ?? true,
  });
  const timeoutMs = tls.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const timer = setTimeout(() => {
    ctx.fail(new GateError(ErrorCodes.TLS_HANDSHAKE_TIMEOUT, `TLS handshake not finished within ${timeoutMs} ms`));
  }, timeoutMs);
  const onHandshakeError = (err: Error): void => {
    clearTimeout(timer);
    ctx.fail(new GateError(ErrorCodes.TLS_HANDSHAKE, `TLS handshake failed: ${err.message}`, { cause: err }));
  };
  // Before adopt(): the first listener's error is the one recorded, and a handshake failure must
  // be logged as GATE_ERR_TLS_HANDSHAKE, not as a generic reset.
  tlsSocket.once('error', onHandshakeError);
  ctx.adopt(tlsSocket);
  tlsSocket.once('close', () => clearTimeout(timer));
  // The listener's sockets are half-open, so a client that gives up mid-handshake (e.g. it did
  // not trust our certificate and closed) only ends its side: without this the connection would
  // sit until the handshake timeout.
  const onEarlyEnd = (): void => {
    clearTimeout(timer);
    ctx.fail(new GateError(ErrorCodes.TLS_HANDSHAKE, 'client closed the connection during the TLS handshake'));
  };
  tlsSocket.once('end', onEarlyEnd);
  tlsSocket.once('secure', () => {
    clearTimeout(timer);
    tlsSocket.removeListener('error', onHandshakeError);
    tlsSocket.removeListener('end', onEarlyEnd);
    // A TLSSocket built by hand does not enforce rejectUnauthorized the way tls.Server does:
    // OpenSSL only asked for the certificate; the verdict is ours to act on.
    if (tls.requestCert) {
      const problem = clientCertificateProblem(tlsSocket);
      tlsSocket.authorized = problem === undefined;
      if (problem !== undefined) tlsSocket.authorizationError = new Error(problem);
      if (problem !== undefined && (tls.rejectUnauthorized ?? true)) {
        const error = new GateError(ErrorCodes.TLS_HANDSHAKE, `client certificate rejected: ${problem}`);
        // 'secure' is emitted from inside OpenSSL's SSL_read (TLSWrap::ClearOut): destroying the
        // streams from here has crashed Node 20.20 (SIGSEGV in ssl3_send_alert) unless the TLS
        // socket goes before its raw socket (Connection.destroyAll does that). Failing on the next
        // turn of the loop keeps us out of that call altogether.
        setImmediate(() => ctx.fail(error));
        return;
      }
    }
    // tls.Server clears `secureConnecting` when the handshake is done (Node lib/_tls_wrap.js
    // onServerSocketSecure); a TLSSocket built by hand keeps it true for ever. http2 reads it: a
    // session given a socket still "connecting" waits for a 'secureConnect' that a server socket
    // never emits, so it never took the socket over (which is why the tunnel once needed a JS stream).
    (tlsSocket as unknown as { secureConnecting: boolean }).secureConnecting = false;
    const negotiated = tlsSocket.alpnProtocol;
    ctx.info.negotiatedAlpn = typeof negotiated === 'string' ? negotiated : undefined;
    next(tlsSocket);
  });
}
