import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { dial, type DialOptions } from './dial.js';
import { parseTarget } from './target.js';

export interface ProbeOptions extends DialOptions {
  /** What the test handshake offers: the ALPN of the route the caller depends on. */
  alpn: string[];
  serverName?: string | undefined;
  handshakeTimeoutMs: number;
}

/**
 * Whether the path to `target` ends TLS before the proxy (an L7 load balancer): a test handshake
 * offering `alpn` that comes back with no ALPN, an ALPN not offered, or a `no_application_protocol`
 * alert (RFC 7301 §3.2) says so. Nothing else is checked (no certificate: only the answer's ALPN
 * matters, and no secret is sent) and the connection is closed at once. Resolves false when the
 * probe itself fails (the caller then keeps the error it already has); honours the dial's signal.
 */
export async function pathEndsTls(target: string, options: ProbeOptions): Promise<boolean> {
  const { host } = parseTarget(target);
  const servername = options.serverName ?? (isIP(host) === 0 ? host : undefined);
  let raw;
  try {
    ({ socket: raw } = await dial(target, options));
  } catch {
    return false;
  }
  const socket = raw;
  return new Promise<boolean>((resolve) => {
    const probe = tlsConnect({
      socket,
      ...(servername === undefined ? {} : { servername }),
      ALPNProtocols: options.alpn,
      rejectUnauthorized: false,
    });
    const done = (endsTls: boolean): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      probe.removeAllListeners('secureConnect');
      probe.removeAllListeners('error');
      probe.on('error', () => {});
      probe.destroy();
      socket.destroy();
      resolve(endsTls);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(false), options.handshakeTimeoutMs);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    probe.once('secureConnect', () => {
      const alpn = probe.alpnProtocol || undefined;
      done(alpn === undefined || !options.alpn.includes(alpn));
    });
    probe.once('error', (err: Error & { code?: string }) => done(err.code === 'ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL'));
  });
}
