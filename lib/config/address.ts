import { isIP } from 'node:net';

/** A parsed network address. `host` never carries IPv6 brackets. */
export interface HostPort {
  host: string;
  port: number;
}

export interface ParseAddressOptions {
  /** Port to use when the text has none; without it a missing port is an error. */
  defaultPort?: number;
  /** Host to use for `:port` (listen addresses: all interfaces); without it an empty host is an error. */
  defaultHost?: string;
  /** Accept port 0 (listen on an ephemeral port, as tests do). */
  allowZeroPort?: boolean;
}

/** The outcome of parsing: the address, or a short description of what is wrong with the text. */
export type ParseAddressResult = { ok: true; address: HostPort } | { ok: false; reason: string };

// RFC 1123 §2.1 host name label: letters, digits and hyphens, not starting or ending with a hyphen,
// at most 63 octets; the whole name at most 253 octets (RFC 1035 §2.3.4, without the trailing dot).
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/** True for a DNS host name (a trailing root dot is allowed) — not for IP literals. */
export function isDnsName(name: string): boolean {
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  if (bare.length === 0 || bare.length > 253) return false;
  const labels = bare.split('.');
  // An all-numeric last label would make "1.2.3" look like a name; DNS TLDs are never all digits.
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '')) return false;
  return labels.every((label) => LABEL.test(label));
}

function parsePort(text: string, allowZero: boolean): number | undefined {
  if (!/^[0-9]{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  if (port > 65535 || (port === 0 && !allowZero)) return undefined;
  return port;
}

function checkHost(host: string): string | undefined {
  if (isIP(host) !== 0) return undefined;
  if (isDnsName(host)) return undefined;
  return `"${host}" is neither an IP address nor a DNS name`;
}

/**
 * Parses `host:port`, `[v6]:port`, `:port` (with `defaultHost`), and `host` / bare IPv6 (with
 * `defaultPort`). Pure: no DNS. A bare IPv6 literal with a port must be bracketed (RFC 3986 §3.2.2),
 * since `::1:80` is itself a valid IPv6 address.
 */
export function parseAddress(text: string, options: ParseAddressOptions = {}): ParseAddressResult {
  const allowZero = options.allowZeroPort ?? false;
  const portRange = allowZero ? '0-65535' : '1-65535';
  const trimmed = text.trim();
  if (trimmed === '') return { ok: false, reason: 'the address is empty' };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) {
    return { ok: false, reason: `"${trimmed}" has a URL scheme; write host:port only` };
  }
  if (/\s/.test(trimmed)) return { ok: false, reason: `"${trimmed}" contains white space` };

  let host: string;
  let portText: string | undefined;
  if (trimmed.startsWith('[')) {
    const close = trimmed.indexOf(']');
    if (close < 0) return { ok: false, reason: `"${trimmed}" opens "[" without closing it` };
    host = trimmed.slice(1, close);
    if (isIP(host) !== 6) return { ok: false, reason: `"${host}" in brackets is not an IPv6 address` };
    const rest = trimmed.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return { ok: false, reason: `unexpected "${rest}" after "]"` };
      portText = rest.slice(1);
    }
  } else if (isIP(trimmed) === 6) {
    host = trimmed;
  } else {
    const colon = trimmed.lastIndexOf(':');
    if (colon >= 0) {
      if (trimmed.indexOf(':') !== colon) {
        return { ok: false, reason: `"${trimmed}" looks like an IPv6 address with a port: write [address]:port` };
      }
      host = trimmed.slice(0, colon);
      portText = trimmed.slice(colon + 1);
    } else {
      host = trimmed;
    }
  }

  let port: number;
  if (portText === undefined) {
    if (options.defaultPort === undefined) {
      return { ok: false, reason: `"${trimmed}" has no port` };
    }
    port = options.defaultPort;
  } else {
    const parsed = parsePort(portText, allowZero);
    if (parsed === undefined) {
      return { ok: false, reason: `port "${portText}" is not a number in ${portRange}` };
    }
    port = parsed;
  }

  if (host === '') {
    if (options.defaultHost === undefined) return { ok: false, reason: `"${trimmed}" has no host` };
    host = options.defaultHost;
  } else {
    const bad = checkHost(host);
    if (bad) return { ok: false, reason: bad };
  }
  return { ok: true, address: { host: host.toLowerCase(), port } };
}

/** `host:port`, bracketing IPv6 literals so the text parses back to the same address. */
export function formatAddress(address: HostPort): string {
  return isIP(address.host) === 6 ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** True when the host means every interface of its family (so it overlaps any other host). */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::';
}

/** True for `ip/prefix` (prefix within the family's width) or a bare IP, which means one host. */
export function isCidr(text: string): boolean {
  const slash = text.indexOf('/');
  const ip = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(ip);
  if (family === 0) return false;
  if (slash < 0) return true;
  const prefix = text.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}
