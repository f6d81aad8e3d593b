import { BlockList, isIP } from 'node:net';

/**
 * NO_PROXY matching, pure (no environment, no I/O). The entry forms follow Go's
 * golang.org/x/net/http/httpproxy `config.init`/`useProxy`, which the platform's Go components use,
 * so an agent written in Node and one written in Go agree on every entry:
 *
 * - `*` (anywhere in the list): everything is direct;
 * - `10.0.0.0/8`, `fd00::/8`: CIDR, IP targets only;
 * - `10.1.2.3`, `10.1.2.3:443`, `::1`, `[::1]:443`: an IP, optionally one port;
 * - `example.com`: itself and its subdomains; `.example.com` and `*.example.com`: subdomains only;
 *   any of them with `:port` matches that port only.
 *
 * Entries are trimmed and case-insensitive; empty and unparsable entries are ignored (Go: "a best
 * effort is made to parse the string and errors are ignored"). Two small extensions over Go: a
 * bracketed IPv6 entry without a port (`[::1]`) is an IP, and one trailing dot on a name is
 * dropped on both sides (`example.com.` is the same DNS name). Host names are never resolved:
 * an IP entry matches only IP targets and a domain entry only named targets, as in Go.
 */
export interface NoProxyRules {
  /** `*` was present. */
  readonly all: boolean;
  /** IPs and CIDRs without a port. */
  readonly anyPort: BlockList;
  /** IPs with a port, keyed by port. */
  readonly byPort: ReadonlyMap<number, BlockList>;
  readonly domains: readonly DomainRule[];
  /** Entries that could not be parsed (for a debug log; never an error). */
  readonly ignored: readonly string[];
}

export interface DomainRule {
  /** Always starts with a dot: `.example.com`. */
  suffix: string;
  /** True for a bare `example.com` entry, which also matches `example.com` itself. */
  matchSelf: boolean;
  port: number | undefined;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

function ipFamily(address: string): 'ipv4' | 'ipv6' | undefined {
  const version = isIP(address);
  return version === 4 ? 'ipv4' : version === 6 ? 'ipv6' : undefined;
}

function normaliseName(host: string): string {
  const lower = host.trim().toLowerCase();
  return lower.endsWith('.') && lower.length > 1 ? lower.slice(0, -1) : lower;
}

function parsePortText(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** Splits `host:port` / `[v6]:port` / `[v6]` / `host`; undefined port text when there is none. */
function splitEntry(entry: string): { host: string; portText: string | undefined } | undefined {
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close < 0) return undefined;
    const rest = entry.slice(close + 1);
    if (rest === '') return { host: entry.slice(1, close), portText: undefined };
    if (!rest.startsWith(':')) return undefined;
    return { host: entry.slice(1, close), portText: rest.slice(1) };
  }
  const colons = entry.split(':').length - 1;
  // More than one colon without brackets can only be a bare IPv6 address.
  if (colons !== 1) return { host: entry, portText: undefined };
  const colon = entry.indexOf(':');
  return { host: entry.slice(0, colon), portText: entry.slice(colon + 1) };
}

const NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

/** Parses a NO_PROXY value into rules; never throws. */
export function parseNoProxy(value: string | undefined): NoProxyRules {
  const anyPort = new BlockList();
  const byPort = new Map<number, BlockList>();
  const domains: DomainRule[] = [];
  const ignored: string[] = [];
  let all = false;
  for (const raw of (value ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') {
      all = true;
      continue;
    }
    const slash = entry.indexOf('/');
    if (slash >= 0) {
      const address = entry.slice(0, slash);
      const family = ipFamily(address);
      const prefixText = entry.slice(slash + 1);
      const prefix = Number(prefixText);
      const max = family === 'ipv4' ? 32 : 128;
      if (!family || !/^\d{1,3}$/.test(prefixText) || prefix > max) {
        ignored.push(entry);
        continue;
      }
      anyPort.addSubnet(address, prefix, family);
      continue;
    }
    const split = splitEntry(entry);
    if (!split || split.host === '') {
      ignored.push(entry);
      continue;
    }
    let port: number | undefined;
    if (split.portText !== undefined) {
      port = parsePortText(split.portText);
      if (port === undefined) {
        ignored.push(entry);
        continue;
      }
    }
    const family = ipFamily(split.host);
    if (family) {
      if (port === undefined) anyPort.addAddress(split.host, family);
      else {
        let list = byPort.get(port);
        if (!list) byPort.set(port, (list = new BlockList()));
        list.addAddress(split.host, family);
      }
      continue;
    }
    let name = split.host;
    let matchSelf = true;
    if (name.startsWith('*.')) name = name.slice(1);
    if (name.startsWith('.')) {
      matchSelf = false;
      name = name.slice(1);
    }
    name = normaliseName(name);
    if (!NAME.test(name)) {
      ignored.push(entry);
      continue;
    }
    domains.push({ suffix: `.${name}`, matchSelf, port });
  }
  return { all, anyPort, byPort, domains, ignored };
}

/** Loopback targets are always dialled directly: 127.0.0.0/8, ::1 (and ::ffff:127.x), localhost, *.localhost. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const family = ipFamily(bare);
  if (family) return LOOPBACK.check(bare, family);
  const name = normaliseName(bare);
  // RFC 6761 §6.3: localhost and its subdomains are loopback names.
  return name === 'localhost' || name.endsWith('.localhost');
}

/** True when the rules say `host:port` must be dialled directly. */
export function noProxyMatches(rules: NoProxyRules, host: string, port: number): boolean {
  if (rules.all) return true;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const family = ipFamily(bare);
  if (family) {
    if (rules.anyPort.check(bare, family)) return true;
    return rules.byPort.get(port)?.check(bare, family) ?? false;
  }
  const name = normaliseName(bare);
  for (const rule of rules.domains) {
    if (rule.port !== undefined && rule.port !== port) continue;
    if (name.endsWith(rule.suffix) || (rule.matchSelf && name === rule.suffix.slice(1))) return true;
  }
  return false;
}
