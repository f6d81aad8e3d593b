import { request as httpRequest, type Agent as HttpAgent, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ErrorCodes, GateError } from '../errors.js';
import { proxyAgentFor } from './http-agent.js';
import type { ProxyRule } from './resolve-proxy.js';

export interface FetchTextOptions {
  /** One deadline for the whole exchange: connect, proxy, headers and body (default 10 s). */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Which proxy variable applies (default `by-scheme`, Go's httpproxy; `dial-back` for the platform's proxy). */
  proxyRule?: ProxyRule;
  ca?: string | Buffer | Array<string | Buffer>;
  /**
   * The name the server's certificate must carry (and the SNI sent), when the URL's host is an
   * address the certificate does not name (a proxy reached by IP, a load balancer in front).
   */
  servername?: string;
  /** Body cap in bytes (default 64 KiB): a version string or a small JSON document. */
  maxBytes?: number;
  headers?: Record<string, string>;
  /** Reuse an agent (e.g. from `proxyAgentFor`); by default one is made and destroyed per call. */
  agent?: HttpAgent;
  signal?: AbortSignal;
}

export interface FetchTextResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * GET `url` through the environment proxy (same resolver as `dial`) and return status and body
 * as UTF-8 text. Built on node:http/https rather than global fetch, whose undici dispatcher
 * knows nothing of our NO_PROXY rules. Errors: GATE_ERR_FETCH_TIMEOUT, GATE_ERR_FETCH_TOO_LARGE,
 * GATE_ERR_FETCH_FAILED (with the cause), GATE_ERR_PROXY_ENV_INVALID. Any status is returned
 * as is; the caller decides what a 404 means.
 */
export function fetchText(url: string, options: FetchTextOptions = {}): Promise<FetchTextResult> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxBytes ?? 64 * 1024;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (err) {
    return Promise.reject(new GateError(ErrorCodes.FETCH_FAILED, `fetch ${JSON.stringify(url)}: not a URL`, { cause: err }));
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return Promise.reject(new GateError(ErrorCodes.FETCH_FAILED, `fetch ${url}: only http and https are supported`));
  }
  const shown = `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  const ownAgent = options.agent
    ? undefined
    : proxyAgentFor({
        ...(options.env ? { env: options.env } : {}),
        ...(options.proxyRule ? { proxyRule: options.proxyRule } : {}),
        ...(options.ca === undefined ? {} : { ca: options.ca }),
      });
  const agent = options.agent ?? ownAgent;
  return new Promise<FetchTextResult>((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | undefined, result?: FetchTextResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (err) req.destroy();
      ownAgent?.destroy();
      if (err) reject(err);
      else resolve(result as FetchTextResult);
    };
    const onAbort = (): void => finish(new GateError(ErrorCodes.FETCH_FAILED, `fetch ${shown} aborted`, { cause: options.signal?.reason }));
    const timer = setTimeout(
      () => finish(new GateError(ErrorCodes.FETCH_TIMEOUT, `fetch ${shown} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    const send = parsed.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(parsed, {
      method: 'GET',
      agent,
      headers: { accept: 'text/plain, application/json;q=0.9, */*;q=0.5', ...options.headers },
      ...(options.ca === undefined ? {} : { ca: options.ca }),
      ...(options.servername === undefined ? {} : { servername: options.servername }),
    });
    req.on('error', (err: Error) =>
      finish(
        err instanceof GateError ? err : new GateError(ErrorCodes.FETCH_FAILED, `fetch ${shown} failed: ${err.message}`, { cause: err }),
      ),
    );
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          finish(new GateError(ErrorCodes.FETCH_TOO_LARGE, `fetch ${shown}: body over ${maxBytes} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () =>
        finish(undefined, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', (err: Error) =>
        finish(new GateError(ErrorCodes.FETCH_FAILED, `fetch ${shown} failed: ${err.message}`, { cause: err })),
      );
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
    req.end();
  });
}
