import type { Socket } from 'node:net';
import { ErrorCodes, type ErrorCode } from '../errors.js';
import { DEFAULT_MAX_CONNECT_HEADER_BYTES, parseConnectResponse } from './connect-response.js';
import type { ProxyConfig } from './proxy-config.js';
import { ProxyError } from './proxy-error.js';
import { formatHostPort } from './target.js';

/** The CONNECT request (RFC 9110 §9.3.6: request-target is authority-form, Host repeats it). */
export function connectRequest(host: string, port: number, proxy: ProxyConfig): string {
  const authority = formatHostPort(host, port);
  const auth = proxy.basicAuthorization();
  return `CONNECT ${authority} HTTP/1.1\r\n` + `Host: ${authority}\r\n` + (auth ? `Proxy-Authorization: ${auth}\r\n` : '') + '\r\n';
}

function statusError(status: number, reason: string, proxy: ProxyConfig, authority: string): ProxyError {
  let code: ErrorCode = ErrorCodes.PROXY_STATUS;
  let what = `refused CONNECT to ${authority} with ${status} ${reason}`.trimEnd();
  // 407 is the proxy's own authentication (RFC 9110 §15.5.8). tinyproxy 1.11 answers 407 when
  // credentials are missing but 401 when they are wrong; an origin cannot answer a CONNECT
  // before the tunnel exists, so a 401 here is the proxy refusing our credentials too.
  if (status === 407 || status === 401) {
    code = ErrorCodes.PROXY_AUTH_REQUIRED;
    what =
      proxy.username === undefined
        ? `requires authentication (${status}): put user:password in the proxy URL`
        : `rejected the credentials of user ${JSON.stringify(proxy.username)} (${status})`;
  } else if (status === 403) {
    code = ErrorCodes.PROXY_FORBIDDEN;
    what = `forbids CONNECT to ${authority} (403 ${reason})`.replace(/ \)$/, ')');
  }
  return new ProxyError(code, `proxy ${proxy.display} ${what}`, { proxy: proxy.display, status });
}

/**
 * Opens an HTTP CONNECT tunnel on a socket already connected to `proxy` (plain or TLS). Resolves
 * once the proxy answered 2xx; any bytes that came after the response header in the same read
 * are put back with `unshift`, so the caller (or a TLSSocket built on it, which drains a
 * socket's buffered bytes on its first read) receives them first. Reads use 'readable' +
 * `read()`, never a 'data' listener, so the socket is handed back neither flowing nor
 * explicitly paused: the caller's own 'data' listener or pipe() starts it as usual.
 * Rejects with a ProxyError (and destroys the socket) on a non-2xx status, a malformed or
 * oversized header, or a close before the header ends.
 */
export function httpConnect(
  socket: Socket,
  host: string,
  port: number,
  proxy: ProxyConfig,
  maxHeaderBytes = DEFAULT_MAX_CONNECT_HEADER_BYTES,
): Promise<void> {
  const authority = formatHostPort(host, port);
  return new Promise<void>((resolve, reject) => {
    let received: Buffer = Buffer.alloc(0);
    const cleanup = (): void => {
      socket.removeListener('readable', onReadable);
      socket.removeListener('end', onEnd);
      socket.removeListener('close', onEnd);
      socket.removeListener('error', onError);
    };
    const fail = (err: ProxyError): void => {
      cleanup();
      socket.destroy();
      reject(err);
    };
    const onError = (err: Error): void =>
      fail(
        new ProxyError(ErrorCodes.PROXY_CLOSED, `proxy ${proxy.display} connection failed during CONNECT to ${authority}: ${err.message}`, {
          proxy: proxy.display,
          cause: err,
        }),
      );
    const onEnd = (): void =>
      fail(
        new ProxyError(
          ErrorCodes.PROXY_CLOSED,
          `proxy ${proxy.display} closed the connection before answering CONNECT to ${authority} (${received.length} bytes received)`,
          { proxy: proxy.display },
        ),
      );
    const onReadable = (): void => {
      // One read() per check: after the header is complete we must not call read() again, or
      // an EOF right behind the tunnel's first bytes would emit 'end' before we unshift them.
      for (;;) {
        const chunk = socket.read() as Buffer | null;
        if (chunk === null) return;
        received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
        const parsed = parseConnectResponse(received, maxHeaderBytes);
        if (parsed.state === 'need-more') continue;
        if (parsed.state === 'too-large') {
          fail(
            new ProxyError(
              ErrorCodes.PROXY_HEADER_TOO_LARGE,
              `proxy ${proxy.display} sent a CONNECT response header over ${maxHeaderBytes} bytes`,
              { proxy: proxy.display },
            ),
          );
          return;
        }
        if (parsed.state === 'malformed') {
          fail(
            new ProxyError(ErrorCodes.PROXY_RESPONSE_MALFORMED, `proxy ${proxy.display} answered CONNECT with ${parsed.reason}`, {
              proxy: proxy.display,
            }),
          );
          return;
        }
        if (parsed.status < 200 || parsed.status > 299) {
          fail(statusError(parsed.status, parsed.reason, proxy, authority));
          return;
        }
        cleanup();
        const rest = received.subarray(parsed.headerBytes);
        if (rest.length > 0) socket.unshift(rest);
        resolve();
        return;
      }
    };
    socket.on('readable', onReadable);
    socket.on('end', onEnd);
    socket.on('close', onEnd);
    socket.on('error', onError);
    socket.write(connectRequest(host, port, proxy));
  });
}
