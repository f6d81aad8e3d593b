import { lookup } from 'node:dns';
import { connect as netConnect, isIP, type LookupFunction, type OnReadOpts, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { DEFAULT_MAX_CONNECT_HEADER_BYTES } from './connect-response.js';
import { withDeadline } from './deadline.js';
import { httpConnect } from './http-connect.js';
import type { ProxyConfig } from './proxy-config.js';
import { ProxyError } from './proxy-error.js';
import { proxyForTarget } from './resolve-proxy.js';
import { socksConnect } from './socks-connect.js';
import { formatHostPort, parseTarget } from './target.js';
import { resolveDialOrder, type DialAddress, type Lookup } from '../transport/address-order.js';

export const DEFAULT_DIAL_TIMEOUT_MS = 10_000;

export interface DialOptions {
  /** Environment to take HTTPS_PROXY / HTTP_PROXY / NO_PROXY from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Override the environment: a proxy to use, or `null` to dial directly. */
  proxy?: ProxyConfig | null;
  /** One deadline for the whole dial: TCP connect, TLS to the proxy, CONNECT/SOCKS handshake. */
  timeoutMs?: number;
  signal?: AbortSignal;
  logger?: Logger;
  /** TLS options for an `https://` proxy (its CA, client certificate...). SNI defaults to the proxy host. */
  proxyTls?: ConnectionOptions;
  /** Cap on the CONNECT response header (default 16 KiB). */
  maxProxyHeaderBytes?: number;
  /** Keep the writable side open after the peer ends (for tunnels that half-close). Default false. */
  allowHalfOpen?: boolean;
  /**
   * Resolves the target's name where the dialer does (socks5://; a direct dial's net.connect), as
   * net.connect's `lookup` option (default dns.lookup): called with `{ all: true }`.
   */
  lookup?: LookupFunction;
  /** Reads into caller-managed buffers (`net.connect`'s `onread`, see transport/read-buffer.ts); direct dials only. */
  onread?: OnReadOpts;
}

export interface DialResult {
  /** Connected to the target: a TCP socket, or one tunnelled through the proxy. */
  socket: Socket;
  /** The proxy the connection went through, or undefined when direct. */
  via: ProxyConfig | undefined;
}

/** Waits for 'connect' (or `readyEvent`), rejecting with whatever error the socket emits first. */
function connected(socket: Socket, readyEvent: 'connect' | 'secureConnect'): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onReady = (): void => {
      socket.removeListener('error', onError);
      resolve();
    };
    const onError = (err: Error): void => {
      socket.removeListener(readyEvent, onReady);
      reject(err);
    };
    socket.once(readyEvent, onReady);
    socket.once('error', onError);
  });
}

/**
 * Connects to `target` (`host:port`, `[v6]:port` or an http(s) URL) directly or through the
 * proxy the environment (or `options.proxy`) gives: HTTP CONNECT over plain TCP or TLS to an
 * `https://` proxy, or SOCKS5 (`socks5h`: the proxy resolves the name; `socks5`: we resolve it
 * first). Errors are GateErrors: GATE_ERR_DIAL_TIMEOUT, GATE_ERR_DIAL_ABORTED,
 * GATE_ERR_DIAL_REFUSED / GATE_ERR_DIAL_FAILED (direct), GATE_ERR_PROXY_UNREACHABLE and the
 * ProxyError codes (through a proxy). On timeout or abort every socket opened is destroyed and
 * no timer stays behind.
 */
export async function dial(target: string, options: DialOptions = {}): Promise<DialResult> {
  const { host, port } = parseTarget(target);
  const via = options.proxy === undefined ? proxyForTarget(target, options.env ?? process.env) : (options.proxy ?? undefined);
  const log = componentLogger(options.logger, 'dialer');
  const timeoutMs = options.timeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS;
  const authority = formatHostPort(host, port);
  const route = via ? `${authority} via ${via.display}` : `${authority} (direct)`;
  log.debug({ target: authority, via: via?.display ?? 'direct' }, 'dialling');

  const socket = await withDeadline<Socket>(
    async (track) => {
      if (!via) return dialDirect(host, port, options, track);
      return dialViaProxy(host, port, { proxy: via, options, timeoutMs, track });
    },
    {
      timeoutMs,
      signal: options.signal,
      timeoutError: () =>
        via
          ? new ProxyError(ErrorCodes.DIAL_TIMEOUT, `dial ${route} timed out after ${timeoutMs} ms`, { proxy: via.display })
          : new GateError(ErrorCodes.DIAL_TIMEOUT, `dial ${route} timed out after ${timeoutMs} ms`),
      abortError: (reason) => new GateError(ErrorCodes.DIAL_ABORTED, `dial ${route} aborted`, { cause: reason }),
      discard: (late) => late.destroy(),
    },
  );
  log.debug({ target: authority, via: via?.display ?? 'direct' }, 'connected');
  return { socket, via };
}

/** The GateError for a direct TCP connect of dial() to `host:port` that failed with `err`: the route is named, as for a dial through a proxy. */
function directConnectError(err: unknown, host: string, port: number): GateError {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
  const authority = formatHostPort(host, port);
  if (code === 'ECONNREFUSED')
    return new GateError(ErrorCodes.DIAL_REFUSED, `dial ${authority} (direct): connection refused`, { cause: err });
  return new GateError(ErrorCodes.DIAL_FAILED, `dial ${authority} (direct) failed: ${(err as Error).message}`, { cause: err });
}

async function dialDirect(host: string, port: number, options: DialOptions, track: (s: Socket) => void): Promise<Socket> {
  const socket = netConnect({
    host,
    port,
    allowHalfOpen: options.allowHalfOpen ?? false,
    ...(options.onread ? { onread: options.onread } : {}),
    ...(options.lookup ? { lookup: options.lookup } : {}),
  });
  track(socket);
  try {
    await connected(socket, 'connect');
  } catch (err) {
    socket.destroy();
    throw directConnectError(err, host, port);
  }
  return socket;
}

/** A dial through `proxy`: the dial's options, its deadline and its socket tracker. */
interface ProxyDial {
  proxy: ProxyConfig;
  options: DialOptions;
  timeoutMs: number;
  track: (s: Socket) => void;
}

/** SOCKS5 replies that speak of the one address asked for: the name's next address may do. */
const ADDRESS_SPECIFIC_SOCKS_REPLIES = new Set([3, 4, 5, 6, 8]); // network/host unreachable, refused, TTL, address type

async function dialViaProxy(host: string, port: number, through: ProxyDial): Promise<Socket> {
  const { proxy, options } = through;
  if (proxy.scheme !== 'socks5' || isIP(host) !== 0) return connectThroughProxy(host, port, through);
  // socks5 (not socks5h) means "resolve locally": the proxy gets an IP. Every address of the name
  // is offered in turn (in the Happy Eyeballs order), each on a new proxy connection, while the
  // proxy's reply concerns that address (a proxy without IPv6 answers reply 8 for localhost's ::1).
  let addresses: DialAddress[];
  try {
    addresses = await new Promise((resolve, reject) =>
      resolveDialOrder(host, (options.lookup ?? lookup) as Lookup, (err, found) => (err ? reject(err) : resolve(found))),
    );
  } catch (err) {
    throw new GateError(ErrorCodes.DIAL_FAILED, `cannot resolve ${host} for socks5 proxy ${proxy.display}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (addresses.length === 0)
    throw new GateError(ErrorCodes.DIAL_FAILED, `cannot resolve ${host} for socks5 proxy ${proxy.display}: no address`);
  for (let i = 0; ; i++) {
    try {
      return await connectThroughProxy(addresses[i]!.address, port, through);
    } catch (err) {
      const last = i === addresses.length - 1;
      if (last || !(err instanceof ProxyError) || err.status === undefined || !ADDRESS_SPECIFIC_SOCKS_REPLIES.has(err.status)) throw err;
    }
  }
}

/** A connection to the proxy (TCP, TLS for https://), then CONNECT or the SOCKS5 handshake for `host`. */
async function connectThroughProxy(host: string, port: number, through: ProxyDial): Promise<Socket> {
  const { proxy, options, timeoutMs, track } = through;
  const raw = netConnect({ host: proxy.host, port: proxy.port, allowHalfOpen: options.allowHalfOpen ?? false });
  track(raw);
  try {
    await connected(raw, 'connect');
  } catch (err) {
    raw.destroy();
    throw new ProxyError(
      ErrorCodes.PROXY_UNREACHABLE,
      `proxy ${proxy.display} (from ${proxy.source}) unreachable: ${(err as Error).message}`,
      {
        proxy: proxy.display,
        cause: err,
      },
    );
  }
  let socket: Socket = raw;
  if (proxy.scheme === 'https') {
    const secure = tlsConnect({
      ...options.proxyTls,
      socket: raw,
      servername: options.proxyTls?.servername ?? (isIP(proxy.host) === 0 ? proxy.host : undefined),
    });
    track(secure);
    try {
      await connected(secure, 'secureConnect');
    } catch (err) {
      secure.destroy();
      throw new ProxyError(ErrorCodes.TLS_HANDSHAKE, `TLS to proxy ${proxy.display} failed: ${(err as Error).message}`, {
        proxy: proxy.display,
        cause: err,
      });
    }
    socket = secure;
  }
  try {
    if (proxy.scheme === 'socks5' || proxy.scheme === 'socks5h') {
      await socksConnect(socket, host, port, proxy, timeoutMs);
    } else {
      await httpConnect(socket, host, port, proxy, options.maxProxyHeaderBytes ?? DEFAULT_MAX_CONNECT_HEADER_BYTES);
    }
  } catch (err) {
    socket.destroy();
    throw err;
  }
  return socket;
}
