import { isIP } from 'node:net';
import { inspect } from 'node:util';
import { ErrorCodes, GateError } from '../errors.js';

export type ProxyScheme = 'http' | 'https' | 'socks5' | 'socks5h';

/** Default proxy port per scheme, as Go's net/http and httpproxy use (80, 443, 1080). */
export const DEFAULT_PROXY_PORTS: Readonly<Record<ProxyScheme, number>> = {
  http: 80,
  https: 443,
  socks5: 1080,
  socks5h: 1080,
};

/**
 * One proxy to go through. The password lives in a private field: it is readable by the dialer
 * but never appears in `JSON.stringify`, `util.inspect`, `String()` or a pino line, which all
 * show the redacted `display` form (`http://user:***@host:port`).
 */
export class ProxyConfig {
  readonly scheme: ProxyScheme;
  /** Host name or IP, without IPv6 brackets. */
  readonly host: string;
  readonly port: number;
  /** Percent-decoded user name, if the URL carried one. */
  readonly username: string | undefined;
  /** Where the value came from: an environment variable name, or e.g. `option`. */
  readonly source: string;
  readonly #password: string | undefined;

  constructor(init: {
    scheme: ProxyScheme;
    host: string;
    port: number;
    username?: string | undefined;
    password?: string | undefined;
    source?: string;
  }) {
    this.scheme = init.scheme;
    this.host = init.host;
    this.port = init.port;
    this.username = init.username;
    this.#password = init.password;
    this.source = init.source ?? 'option';
  }

  /** Percent-decoded password, if any. */
  get password(): string | undefined {
    return this.#password;
  }

  /** `host:port` of the proxy, IPv6 bracketed. */
  get hostPort(): string {
    return isIP(this.host) === 6 ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  /** Redacted URL for logs and errors: the password, when present, is `***`. */
  get display(): string {
    let auth = '';
    if (this.username !== undefined) {
      auth = encodeURIComponent(this.username);
      if (this.#password !== undefined) auth += ':***';
      auth += '@';
    }
    return `${this.scheme}://${auth}${this.hostPort}`;
  }

  /** Full URL with credentials percent-encoded, for libraries that take a URL (proxy-agent). */
  toUrlWithCredentials(): string {
    let auth = '';
    if (this.username !== undefined) {
      auth = encodeURIComponent(this.username);
      if (this.#password !== undefined) auth += `:${encodeURIComponent(this.#password)}`;
      auth += '@';
    }
    return `${this.scheme}://${auth}${this.hostPort}`;
  }

  /** `Proxy-Authorization` value (RFC 7617 Basic), or undefined without credentials. */
  basicAuthorization(): string | undefined {
    if (this.username === undefined) return undefined;
    return `Basic ${Buffer.from(`${this.username}:${this.#password ?? ''}`, 'utf8').toString('base64')}`;
  }

  toString(): string {
    return this.display;
  }

  toJSON(): string {
    return this.display;
  }

  [inspect.custom](): string {
    return `ProxyConfig<${this.display} from ${this.source}>`;
  }
}

/**
 * A raw environment value with any password replaced by `***`, for error messages. Works on
 * values that do not parse: everything between `scheme://` (or the start) and the last `@` is
 * userinfo, and whatever follows its first `:` is the password.
 */
export function redactProxyValue(value: string): string {
  const at = value.lastIndexOf('@');
  if (at < 0) return value;
  const schemeEnd = value.indexOf('://');
  const start = schemeEnd >= 0 && schemeEnd < at ? schemeEnd + 3 : 0;
  const userinfo = value.slice(start, at);
  const colon = userinfo.indexOf(':');
  if (colon < 0) return value;
  return `${value.slice(0, start)}${userinfo.slice(0, colon)}:***${value.slice(at)}`;
}

function invalid(source: string, value: string, why: string): GateError {
  return new GateError(ErrorCodes.PROXY_ENV_INVALID, `${source}=${JSON.stringify(redactProxyValue(value))} is not a usable proxy: ${why}`);
}

function decode(part: string, source: string, value: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw invalid(source, value, `bad percent-encoding in the ${what}`);
  }
}

/**
 * Parses `scheme://[user[:password]@]host[:port]`; a value without `scheme://` means `http://`
 * (Go's httpproxy parseProxy retries with "http://" prepended). `source` names the variable in
 * errors. The hosts `localhost` and `127.0.0.1` (and `::1`) are refused: tell the user to pick
 * another name for the same machine, because tools that share the environment (Go's httpproxy
 * among them) never proxy loopback targets and would disagree with us. Other loopback addresses
 * (127.0.0.2) stay usable.
 */
export function parseProxyUrl(rawValue: string, source = 'option'): ProxyConfig {
  const value = rawValue.trim();
  if (value === '') throw invalid(source, rawValue, 'empty');
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  const schemeText = withScheme.slice(0, withScheme.indexOf(':')).toLowerCase();
  if (!(schemeText in DEFAULT_PROXY_PORTS)) {
    throw invalid(source, value, `scheme ${schemeText} is not one of http, https, socks5, socks5h`);
  }
  const scheme = schemeText as ProxyScheme;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw invalid(source, value, 'not a valid URL');
  }
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    throw invalid(source, value, 'a proxy URL has no path, query or fragment');
  }
  let host = url.hostname.toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host === '') throw invalid(source, value, 'no host');
  if (host === 'localhost' || host === '127.0.0.1' || host === '::1') {
    throw invalid(
      source,
      value,
      `proxy host ${host} is not allowed: use another DNS name or a private IP for this machine (e.g. 127.0.0.2 or the host's LAN address)`,
    );
  }
  const port = url.port === '' ? DEFAULT_PROXY_PORTS[scheme] : Number(url.port);
  const username = url.username !== '' || url.password !== '' ? decode(url.username, source, value, 'user name') : undefined;
  const password = url.password !== '' ? decode(url.password, source, value, 'password') : undefined;
  return new ProxyConfig({ scheme, host, port, username, password, source });
}
