import { isIP } from 'node:net';
import { ErrorCodes, GateError } from '../errors.js';

/** Where a dial or request goes: host (no brackets, as given), port, and the URL scheme if any. */
export interface DialTarget {
  host: string;
  port: number;
  /**
   * `http` or `https` when the target was a URL (ws/wss count as http/https, as proxy-agent asks
   * for them); undefined for a raw `host:port` dial. It decides which proxy variable applies.
   */
  scheme: 'http' | 'https' | undefined;
}

const DEFAULT_PORTS = { http: 80, https: 443 } as const;

function parsePort(text: string, target: string): number {
  if (!/^\d{1,5}$/.test(text)) throw invalidTarget(target, 'port is not a number');
  const port = Number(text);
  if (port < 1 || port > 65535) throw invalidTarget(target, 'port out of range');
  return port;
}

function invalidTarget(target: string, why: string): GateError {
  return new GateError(ErrorCodes.TARGET_INVALID, `invalid dial target ${JSON.stringify(target)}: ${why}`);
}

/**
 * Parses `host:port`, `[v6]:port` or an `http(s)://` (or `ws(s)://`) URL. A URL without a port
 * gets its scheme's default port (80/443), as Go's httpproxy canonicalAddr does.
 */
export function parseTarget(target: string): DialTarget {
  const urlMatch = /^([a-z][a-z0-9+.-]*):\/\//i.exec(target);
  if (urlMatch) {
    const given = (urlMatch[1] ?? '').toLowerCase();
    const scheme = given === 'https' || given === 'wss' ? 'https' : given === 'http' || given === 'ws' ? 'http' : undefined;
    if (!scheme) throw invalidTarget(target, `unsupported scheme ${given}`);
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw invalidTarget(target, 'not a valid URL');
    }
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (!host) throw invalidTarget(target, 'no host');
    // WHATWG URL drops the port when it equals the scheme default (ws/wss share http/https's).
    const port = url.port ? Number(url.port) : DEFAULT_PORTS[scheme];
    return { host, port, scheme };
  }
  let host: string;
  let portText: string;
  if (target.startsWith('[')) {
    const close = target.indexOf(']');
    if (close < 0 || target[close + 1] !== ':') throw invalidTarget(target, 'expected [v6]:port');
    host = target.slice(1, close);
    portText = target.slice(close + 2);
    if (isIP(host) !== 6) throw invalidTarget(target, 'bracketed host is not an IPv6 address');
  } else {
    const colon = target.lastIndexOf(':');
    if (colon <= 0) throw invalidTarget(target, 'expected host:port');
    host = target.slice(0, colon);
    portText = target.slice(colon + 1);
    if (host.includes(':')) throw invalidTarget(target, 'an IPv6 address needs brackets: [v6]:port');
  }
  return { host, port: parsePort(portText, target), scheme: undefined };
}

/** `host:port`, bracketing an IPv6 literal (RFC 3986 §3.2.2), as CONNECT's request-target wants. */
export function formatHostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}
