import { GateError, type ErrorCode } from '../errors.js';

/**
 * A failure at or behind a proxy. `proxy` is the redacted URL (never the password), `status` the
 * HTTP status (or SOCKS5 reply code) when the proxy answered with one.
 */
export class ProxyError extends GateError {
  readonly proxy: string;
  readonly status: number | undefined;
  constructor(code: ErrorCode, message: string, details: { proxy: string; status?: number; cause?: unknown }) {
    super(code, message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'ProxyError';
    this.proxy = details.proxy;
    this.status = details.status;
  }
}
