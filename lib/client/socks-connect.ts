import type { Socket } from 'node:net';
import { SocksClient, type SocksClientError } from 'socks';
import { ErrorCodes, type ErrorCode } from '../errors.js';
import type { ProxyConfig } from './proxy-config.js';
import { ProxyError } from './proxy-error.js';
import { formatHostPort } from './target.js';

// RFC 1928 §6 reply codes, for messages.
const SOCKS5_REPLIES: Record<string, number> = {
  Failure: 1,
  NotAllowed: 2,
  NetworkUnreachable: 3,
  HostUnreachable: 4,
  ConnectionRefused: 5,
  TTLExpired: 6,
  CommandNotSupported: 7,
  AddressNotSupported: 8,
};

function mapSocksError(err: Error, proxy: ProxyConfig, authority: string): ProxyError {
  const message = err.message;
  let code: ErrorCode = ErrorCodes.PROXY_RESPONSE_MALFORMED;
  let status: number | undefined;
  let what = `failed the SOCKS5 handshake for ${authority}: ${message}`;
  if (/Authentication failed/i.test(message)) {
    code = ErrorCodes.PROXY_AUTH_REQUIRED;
    what = `rejected the SOCKS5 credentials of user ${JSON.stringify(proxy.username ?? '')}`;
  } else if (/no accepted authentication type/i.test(message)) {
    code = ErrorCodes.PROXY_AUTH_REQUIRED;
    what =
      proxy.username === undefined
        ? 'requires SOCKS5 authentication: put user:password in the proxy URL'
        : 'accepts none of the offered SOCKS5 authentication methods';
  } else if (/rejected connection/i.test(message)) {
    const name = /- (\w+)$/.exec(message)?.[1] ?? 'Failure';
    status = SOCKS5_REPLIES[name];
    code = name === 'NotAllowed' ? ErrorCodes.PROXY_FORBIDDEN : ErrorCodes.PROXY_STATUS;
    what = `refused the SOCKS5 connect to ${authority}: ${name} (reply ${status ?? '?'})`;
  } else if (/Socket closed/i.test(message)) {
    code = ErrorCodes.PROXY_CLOSED;
    what = `closed the connection during the SOCKS5 handshake for ${authority}`;
  } else if (/timed out/i.test(message)) {
    code = ErrorCodes.DIAL_TIMEOUT;
    what = `did not finish the SOCKS5 handshake for ${authority} in time`;
  }
  return new ProxyError(code, `proxy ${proxy.display} ${what}`, {
    proxy: proxy.display,
    cause: err,
    ...(status === undefined ? {} : { status }),
  });
}

/**
 * SOCKS5 CONNECT (RFC 1928, user/password RFC 1929) on a socket already connected to the proxy,
 * through the `socks` package. `host` is sent as a name for socks5h and must already be an IP
 * for socks5 (the dialer resolves it locally first).
 *
 * `socks` keeps bytes that arrived with its last handshake reply and re-emits them as a 'data'
 * event on setImmediate, then resume()s the socket: a consumer attached later loses them. We
 * attach a collector synchronously when the handshake resolves (before that setImmediate), let
 * `socks` run its immediate, then in our own later immediate put everything collected back with
 * `unshift` and reset the stream so it is neither flowing nor paused, like a fresh socket.
 */
export async function socksConnect(socket: Socket, host: string, port: number, proxy: ProxyConfig, timeoutMs: number): Promise<void> {
  const authority = formatHostPort(host, port);
  let established;
  try {
    established = await SocksClient.createConnection({
      command: 'connect',
      destination: { host, port },
      proxy: {
        host: proxy.host,
        port: proxy.port,
        type: 5,
        ...(proxy.username === undefined ? {} : { userId: proxy.username, password: proxy.password ?? '' }),
      },
      existing_socket: socket,
      // Our own deadline fires first; this only bounds `socks`' internal (unref'd) timer.
      timeout: timeoutMs + 1000,
    });
  } catch (err) {
    socket.destroy();
    throw mapSocksError(err as SocksClientError, proxy, authority);
  }
  const tunnel = established.socket;
  const collected: Buffer[] = [];
  const collect = (chunk: Buffer): void => {
    collected.push(chunk);
  };
  tunnel.on('data', collect);
  await new Promise<void>((resolve) => setImmediate(resolve));
  tunnel.removeListener('data', collect);
  tunnel.pause();
  if (collected.length > 0) tunnel.unshift(Buffer.concat(collected));
  // pause() left the stream explicitly paused, where a later 'data' listener would not start it;
  // back to the initial "no mode yet" state so on('data') and pipe() behave as on any socket.
  (tunnel as { readableFlowing: boolean | null }).readableFlowing = null;
}
