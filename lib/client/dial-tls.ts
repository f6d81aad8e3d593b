import { isIP } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger } from '../log.js';
import { dial, DEFAULT_DIAL_TIMEOUT_MS, type DialOptions } from './dial.js';
import type { ProxyConfig } from './proxy-config.js';
import { parseTarget } from './target.js';

export interface DialTlsOptions extends DialOptions {
  /** SNI and the name the certificate is checked against (default: the target host unless it is an IP). */
  serverName?: string;
  /** ALPN protocols to offer, in preference order. */
  alpn: string[];
  /** Fail with GATE_ERR_ALPN_MISMATCH unless the server selected one of `alpn`. */
  requireAlpn?: boolean;
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Default true. */
  rejectUnauthorized?: boolean;
  /** Replaces the host-name check (Node's `checkServerIdentity`), for a peer known by a role rather than a name. */
  checkServerIdentity?: ConnectionOptions['checkServerIdentity'];
  /** Deadline for the TLS handshake after the dial (default: `timeoutMs`, else 10 s). */
  handshakeTimeoutMs?: number;
}

export interface DialTlsResult {
  socket: TLSSocket;
  via: ProxyConfig | undefined;
  /** The ALPN protocol the server selected, or undefined when it selected none. */
  alpn: string | undefined;
}

/**
 * `dial` then TLS on the resulting stream (`tls.connect({socket})`), with the platform's ALPN.
 * The multiplexer routes on SNI and ALPN, so a server that ignored our ALPN has put us on a
 * route we did not ask for: with `requireAlpn` that is GATE_ERR_ALPN_MISMATCH, not a
 * connection that later fails with confusing protocol errors.
 */
export async function dialTls(target: string, options: DialTlsOptions): Promise<DialTlsResult> {
  const { host } = parseTarget(target);
  const log = componentLogger(options.logger, 'dialer');
  const { socket: raw, via } = await dial(target, options);
  const servername = options.serverName ?? (isIP(host) === 0 ? host : undefined);
  const handshakeMs = options.handshakeTimeoutMs ?? options.timeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
  const route = via ? `${target} via ${via.display}` : `${target} (direct)`;
  const socket = tlsConnect({
    socket: raw,
    ...(servername === undefined ? {} : { servername }),
    ALPNProtocols: options.alpn,
    ...(options.ca === undefined ? {} : { ca: options.ca }),
    ...(options.cert === undefined ? {} : { cert: options.cert }),
    ...(options.key === undefined ? {} : { key: options.key }),
    rejectUnauthorized: options.rejectUnauthorized ?? true,
    ...(options.checkServerIdentity === undefined ? {} : { checkServerIdentity: options.checkServerIdentity }),
  });
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.removeListener('secureConnect', onSecure);
      socket.removeListener('error', onError);
      if (err) {
        socket.destroy();
        raw.destroy();
        reject(err);
      } else resolve();
    };
    const onSecure = (): void => done();
    const onError = (err: Error): void =>
      done(new GateError(ErrorCodes.TLS_HANDSHAKE, `TLS to ${route} failed: ${err.message}`, { cause: err }));
    const onAbort = (): void =>
      done(new GateError(ErrorCodes.DIAL_ABORTED, `TLS to ${route} aborted`, { cause: options.signal?.reason }));
    const timer = setTimeout(
      () => done(new GateError(ErrorCodes.TLS_HANDSHAKE_TIMEOUT, `TLS to ${route} timed out after ${handshakeMs} ms`)),
      handshakeMs,
    );
    socket.once('secureConnect', onSecure);
    socket.once('error', onError);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  });
  const alpn = socket.alpnProtocol || undefined;
  if (options.requireAlpn && (alpn === undefined || !options.alpn.includes(alpn))) {
    socket.destroy();
    throw new GateError(
      ErrorCodes.ALPN_MISMATCH,
      `TLS to ${route}: server selected ${alpn === undefined ? 'no ALPN protocol' : JSON.stringify(alpn)}, offered ${options.alpn.join(', ')}`,
    );
  }
  log.debug({ target, via: via?.display ?? 'direct', alpn }, 'TLS established');
  return { socket, via, alpn };
}
