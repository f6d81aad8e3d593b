import { formatAddress, isCidr, isWildcardHost, parseAddress, type HostPort, type ParseAddressOptions } from './address.js';
import { channelNameProblem, normalizeVersion, type ChannelConfig } from './channel.js';
import { checkAgentUpgrades, type MaintenanceConfig } from './maintenance-schedule.js';
import { formatDuration, parseDuration } from './duration.js';
import { parseStoreUrl } from './store-url.js';
import { LEGACY_PORTS, LISTEN_ADDR_KEYS, hasOwnPort, listenAddressFor, protocolEnabled } from './listen-addresses.js';
import {
  DEFAULT_AGENT_CERTIFICATE_TTL_MS,
  DEFAULT_PRESENCE_TTL_MS,
  DEFAULT_UPGRADE_PING_INTERVAL_MS,
  DEFAULT_WEB_HEADERS_TIMEOUT_MS,
  DEFAULT_WEB_LISTEN,
  DEFAULT_WEB_REQUEST_TIMEOUT_MS,
  GATE_SCHEMA,
  MAX_WEB_DEADLINE_MS,
} from './gate-schema.js';
import { keysOf } from './schema.js';
import { nearestKey } from './suggest.js';
import { DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE } from '../mux/connection-budget.js';
import { MUX_DEFAULTS } from '../mux/options.js';
import { isTunnelUpstream, parseTunnelUpstream } from '../vocabulary/tunnel-upstream.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';
import { DEFAULT_JOIN_LIMITS, type RateLimit } from '../vocabulary/join-limits.js';
import {
  UPSTREAM_PROTOCOLS,
  type AgentAuthConfig,
  type ClusterConfig,
  type GateConfig,
  type JoinTokenConfig,
  type Upstream,
  type KeyPairFiles,
  type ListenerMode,
  type ProxyServiceConfig,
  type UpstreamProtocol,
} from './types.js';

/**
 * Hand-written validation of the parsed YAML value. Every problem is recorded with its key path and
 * what was expected; all problems are collected (not just the first) so one edit fixes a file.
 */

export type PathSegment = string | number;

export interface ConfigIssue {
  path: PathSegment[];
  message: string;
}

export interface ValidationResult {
  /** Present only when there are no issues. */
  config: GateConfig | undefined;
  issues: ConfigIssue[];
  warnings: ConfigIssue[];
}

// Key lists come from the one declaration of the file (gate-schema.ts), which the JSON Schema for
// editors is generated from too; the readers below check values and normalise them.
const TOP_KEYS = keysOf(GATE_SCHEMA);
const CLUSTER_KEYS = keysOf(GATE_SCHEMA, 'cluster');
const MIN_PRESENCE_TTL_MS = 1_000;
const AIMED_PRESENCE_TTL_MS = 15_000;
const AUTH_KEYS = keysOf(GATE_SCHEMA, 'auth_service');
const RATE_LIMIT_KEYS = keysOf(GATE_SCHEMA, 'auth_service', 'join_rate_limit');
const JOIN_TOKEN_KEYS = keysOf(GATE_SCHEMA, 'auth_service', 'join_tokens', '*');
/** Below this a certificate could expire before the agent's renewal (at two thirds) gets through. */
const MIN_AGENT_CERTIFICATE_TTL_MS = 60 * 1000;
const PROXY_KEYS = keysOf(GATE_SCHEMA, 'proxy_service');
const KEYPAIR_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'https_keypairs', '*');
const CHANNEL_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'automatic_upgrades_channels', '*');
const MAINTENANCE_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'cluster_maintenance_config');
const UPSTREAM_KEYS = keysOf(GATE_SCHEMA, 'proxy_service', 'upstreams');

/** Which section each key belongs to, to point at the right place when one is misplaced. */
const SECTION_OF: Record<string, string> = {
  ...Object.fromEntries(AUTH_KEYS.map((k) => [k, 'auth_service'])),
  ...Object.fromEntries(PROXY_KEYS.map((k) => [k, 'proxy_service'])),
  ...Object.fromEntries(CLUSTER_KEYS.map((k) => [k, 'cluster'])),
  ...Object.fromEntries(TOP_KEYS.map((k) => [k, 'the top level'])),
};

export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out || '(top level)';
}

/** A value as a problem message shows it (`"text"`, `a list`, `number 3`). */
export function describe(value: unknown): string {
  if (value === null || value === undefined) return 'an empty value';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return `"${value.length > 60 ? `${value.slice(0, 57)}...` : value}"`;
  return `${typeof value} ${String(value)}`;
}

function isPlainMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Collects problems (each with its key path) while reading a parsed YAML value; shared by every file gate reads. */
export class Checker {
  readonly issues: ConfigIssue[] = [];
  readonly warnings: ConfigIssue[] = [];

  fail(path: PathSegment[], message: string): undefined {
    this.issues.push({ path, message });
    return undefined;
  }

  warn(path: PathSegment[], message: string): void {
    this.warnings.push({ path, message });
  }

  /** A section: absent or empty (`auth_service:`) reads as an empty mapping. */
  section(value: unknown, path: PathSegment[]): Record<string, unknown> | undefined {
    if (value === undefined || value === null) return {};
    if (isPlainMap(value)) return value;
    return this.fail(path, `expected a mapping, got ${describe(value)}`);
  }

  /** Unknown keys are errors; a near miss or a key from another section gets a hint. */
  keys(map: Record<string, unknown>, known: readonly string[], path: PathSegment[]): void {
    for (const key of Object.keys(map)) {
      if (known.includes(key)) continue;
      const home = SECTION_OF[key];
      const near = nearestKey(key, known);
      if (home !== undefined) this.fail([...path, key], `unknown key here (it belongs under ${home})`);
      else if (near !== undefined) this.fail([...path, key], `unknown key (did you mean "${near}"?)`);
      else this.fail([...path, key], `unknown key; expected one of: ${known.join(', ')}`);
    }
  }

  string(value: unknown, path: PathSegment[], expected: string): string | undefined {
    if (typeof value === 'string' && value.trim() !== '') return value.trim();
    return this.fail(path, `expected ${expected}, got ${describe(value)}`);
  }

  address(value: unknown, path: PathSegment[], expected: string, options: ParseAddressOptions): HostPort | undefined {
    if (typeof value !== 'string') return this.fail(path, `expected ${expected}, got ${describe(value)}`);
    const result = parseAddress(value, options);
    if (!result.ok) return this.fail(path, `expected ${expected}: ${result.reason}`);
    return result.address;
  }

  /** A public address: one string or a list of strings. */
  addressList(value: unknown, path: PathSegment[], defaultPort: number): HostPort[] {
    if (value === undefined) return [];
    const expected = 'a host name or IP with an optional port, or a list of them';
    const items = typeof value === 'string' ? [value] : value;
    if (!Array.isArray(items)) {
      this.fail(path, `expected ${expected}, got ${describe(value)}`);
      return [];
    }
    const out: HostPort[] = [];
    items.forEach((item, index) => {
      const itemPath = typeof value === 'string' ? path : [...path, index];
      const address = this.address(item, itemPath, 'host[:port]', { defaultPort });
      if (address) out.push(address);
    });
    return out;
  }

  /**
   * A duration within `bounds` (default: any up to `MAX_DURATION_MS`). `min` is the shortest that
   * still makes sense for the key (`detect_timeout: 1ms` would cut every real client); `zero`
   * allows 0 below it, where 0 means "never" (idle_timeout).
   */
  duration(value: unknown, path: PathSegment[], fallback: number, bounds: DurationBounds = {}): number {
    if (value === undefined) return fallback;
    const ms = value === 0 ? 0 : typeof value === 'string' ? parseDuration(value) : undefined; // a bare 0 needs no unit
    if (ms === undefined) {
      this.fail(path, `expected a duration such as 10s, 500ms or 1m30s, got ${describe(value)}`);
      return fallback;
    }
    return this.bounded(ms, path, fallback, bounds);
  }

  private bounded(ms: number, path: PathSegment[], fallback: number, bounds: DurationBounds): number {
    const max = bounds.max ?? MAX_DURATION_MS;
    if (ms === 0 && bounds.zero) return 0;
    const zeroNote = bounds.zero ? ' (or 0)' : '';
    if (bounds.min !== undefined && ms < bounds.min) {
      this.fail(
        path,
        `expected at least ${formatDuration(bounds.min)}${zeroNote}${bounds.why ? ` (${bounds.why})` : ''}, got ${formatDuration(ms)}`,
      );
      return fallback;
    }
    if (ms > max) {
      this.fail(path, `expected at most ${formatDuration(max)}, got ${formatDuration(ms)}`);
      return fallback;
    }
    return ms;
  }
}

/** What `Checker.duration` accepts for one key. */
interface DurationBounds {
  min?: number;
  max?: number;
  /** 0 is allowed below `min` (it means "never"). */
  zero?: boolean;
  /** Why the minimum, for the message. */
  why?: string;
}

/** Node's timers hold at most 2^31-1 ms (about 24.8 days); a longer one fires at once. Whole hours below it. */
export const MAX_DURATION_MS = 596 * 3_600_000;

/**
 * The shortest deadline a client on an ordinary link can meet: a round trip or two, and a
 * scheduler's hiccup. Below it the deadline cuts real clients, not slow ones.
 */
export const MIN_DEADLINE_MS = 100;

function readListenerMode(c: Checker, auth: Record<string, unknown>): ListenerMode {
  const value = auth.proxy_listener_mode;
  if (value === undefined) return 'multiplex';
  if (value === 'multiplex' || value === 'separate') return value;
  c.fail(['auth_service', 'proxy_listener_mode'], `expected "multiplex" or "separate", got ${describe(value)}`);
  return 'multiplex';
}

function readKeypairs(c: Checker, value: unknown): KeyPairFiles[] {
  const path = ['proxy_service', 'https_keypairs'];
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    c.fail(path, `expected a list of {cert_file, key_file}, got ${describe(value)}`);
    return [];
  }
  const out: KeyPairFiles[] = [];
  value.forEach((item, index) => {
    const itemPath = [...path, index];
    if (!isPlainMap(item)) {
      c.fail(itemPath, `expected a mapping with cert_file and key_file, got ${describe(item)}`);
      return;
    }
    c.keys(item, KEYPAIR_KEYS, itemPath);
    const certFile = c.string(item.cert_file, [...itemPath, 'cert_file'], 'a certificate file path');
    const keyFile = c.string(item.key_file, [...itemPath, 'key_file'], 'a private key file path');
    if (certFile !== undefined && keyFile !== undefined) out.push({ certFile, keyFile });
  });
  return out;
}

function readProxyProtocol(c: Checker, value: unknown): 'on' | 'off' {
  // YAML 1.1 readers turn a bare `on`/`off` into booleans; accept both spellings.
  if (value === undefined || value === 'off' || value === false) return 'off';
  if (value === 'on' || value === true) return 'on';
  c.fail(['proxy_service', 'proxy_protocol'], `expected "on" or "off", got ${describe(value)}`);
  return 'off';
}

const ANY_SOURCE = ['0.0.0.0/0', '::/0'];

function readTrustedNetworks(c: Checker, value: unknown, key = 'proxy_protocol_trusted_networks', absent: string[] = ANY_SOURCE): string[] {
  const path = ['proxy_service', key];
  // PROXY headers default to every source, as the platform's `proxy_protocol: on` (the port is
  // meant to be reachable only through the load balancer that adds the header).
  if (value === undefined) return absent;
  if (!Array.isArray(value)) {
    c.fail(path, `expected a list of CIDRs such as 10.0.0.0/8, got ${describe(value)}`);
    return [];
  }
  const out: string[] = [];
  value.forEach((item, index) => {
    if (typeof item === 'string' && isCidr(item.trim())) out.push(item.trim());
    else c.fail([...path, index], `expected a CIDR such as 10.0.0.0/8 or an IP, got ${describe(item)}`);
  });
  return out;
}

function readChannels(c: Checker, value: unknown): Record<string, ChannelConfig> {
  const path = ['proxy_service', 'automatic_upgrades_channels'];
  const out: Record<string, ChannelConfig> = {};
  if (value === undefined) return out;
  if (!isPlainMap(value)) {
    c.fail(path, `expected a mapping of channel name to {static_version} or {forward_url}, got ${describe(value)}`);
    return out;
  }
  for (const [name, channel] of Object.entries(value)) {
    const channelPath = [...path, name];
    const nameProblem = channelNameProblem(name);
    if (nameProblem) {
      c.fail(channelPath, `bad channel name: ${nameProblem}`);
      continue;
    }
    if (!isPlainMap(channel)) {
      c.fail(channelPath, `expected a mapping with static_version or forward_url, got ${describe(channel)}`);
      continue;
    }
    c.keys(channel, CHANNEL_KEYS, channelPath);
    const hasStatic = channel.static_version !== undefined;
    const hasForward = channel.forward_url !== undefined;
    if (hasStatic === hasForward) {
      c.fail(channelPath, `expected exactly one of static_version or forward_url, got ${hasStatic ? 'both' : 'neither'}`);
      continue;
    }
    if (channel.critical !== undefined && !hasStatic) {
      // A forwarded channel's upstream says what is critical (`<forward_url>/critical`).
      c.fail([...channelPath, 'critical'], 'only beside static_version: a forward_url channel forwards /critical too');
      continue;
    }
    const insecure = channel.allow_insecure_forward_url;
    if (insecure !== undefined && (!hasForward || typeof insecure !== 'boolean')) {
      c.fail(
        [...channelPath, 'allow_insecure_forward_url'],
        hasForward ? `expected true or false, got ${describe(insecure)}` : 'only beside forward_url',
      );
      continue;
    }
    if (channel.critical !== undefined && typeof channel.critical !== 'boolean') {
      c.fail([...channelPath, 'critical'], `expected true or false, got ${describe(channel.critical)}`);
      continue;
    }
    if (hasStatic) {
      const raw = channel.static_version;
      const version = typeof raw === 'string' ? normalizeVersion(raw) : undefined;
      if (version === undefined) {
        c.fail([...channelPath, 'static_version'], `expected a semantic version such as v1.2.3, got ${describe(raw)}`);
      } else {
        out[name] = { kind: 'static', version, ...(channel.critical === true ? { critical: true } : {}) };
      }
    } else {
      const url = readForwardUrl(c, channel.forward_url, [...channelPath, 'forward_url'], insecure === true);
      if (url !== undefined) out[name] = { kind: 'forward', url, ...(url.startsWith('http:') ? { insecure: true } : {}) };
    }
  }
  return out;
}

/** `cluster_maintenance_config: {agent_upgrades: {utc_start_hour, weekdays}}`: the exported schedule's spec. */
function readMaintenanceConfig(c: Checker, value: unknown): MaintenanceConfig | undefined {
  const path = ['proxy_service', 'cluster_maintenance_config'];
  if (value === undefined) return undefined;
  if (!isPlainMap(value)) return c.fail(path, `expected a mapping with agent_upgrades, got ${describe(value)}`);
  c.keys(value, MAINTENANCE_KEYS, path);
  const result = checkAgentUpgrades(value.agent_upgrades);
  if (result.ok) return result.config;
  return c.fail([...path, 'agent_upgrades', ...result.path], `expected utc_start_hour (0-23) and optional weekdays: ${result.why}`);
}

function readForwardUrl(c: Checker, raw: unknown, path: PathSegment[], allowHttp: boolean): string | undefined {
  const expected = 'an https:// URL without query or fragment';
  if (typeof raw !== 'string') return c.fail(path, `expected ${expected}, got ${describe(raw)}`);
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return c.fail(path, `expected ${expected}, got ${describe(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return c.fail(path, `expected ${expected}, got scheme "${url.protocol}"`);
  }
  // The upstream's answer is the version every enrolled agent installs, as root: in plain HTTP
  // anyone on the path chooses it (issue 37). Only when the file says so, beside the URL.
  if (url.protocol === 'http:' && !allowHttp) {
    return c.fail(
      path,
      `plain http:// lets anyone on the path choose the version every enrolled agent installs: use https://, or set allow_insecure_forward_url: true beside it`,
    );
  }
  // `/version` is appended to the path (as the platform does), which a query or fragment would break.
  if (url.search !== '' || url.hash !== '') return c.fail(path, `expected ${expected}, got ${describe(raw)}`);
  return url.href.replace(/\/+$/, '');
}

function readUpstreams(c: Checker, value: unknown): Partial<Record<UpstreamProtocol, Upstream>> {
  const path = ['proxy_service', 'upstreams'];
  const out: Partial<Record<UpstreamProtocol, Upstream>> = {};
  const map = c.section(value, path);
  if (!map) return out;
  c.keys(map, UPSTREAM_KEYS, path);
  for (const protocol of UPSTREAM_PROTOCOLS) {
    const raw = map[protocol];
    if (raw === undefined) continue;
    const at = [...path, protocol];
    if (protocol === 'tunnel') {
      // Older proxies forwarded the tunnel ALPN's cleartext to this address; the proxy now
      // hosts agents itself, so an old file must be edited rather than silently half-obeyed.
      c.fail(
        at,
        "no longer used: the proxy hosts agents' reverse tunnels itself (mutual TLS against its CA); remove this key, " +
          'and point a protocol at a resource behind an agent with tunnel:<agent>/<host:port>, e.g. postgres: tunnel:db-agent/127.0.0.1:5432',
      );
      continue;
    }
    if (protocol === 'peer') {
      // Older proxies passed the peer port's TLS through to this address; the proxy now serves
      // peering itself (mutual TLS between the proxies of one cluster), so the key must go.
      c.fail(
        at,
        'no longer used: the proxy serves peering itself on proxy_service.peer_listen_addr (mutual TLS between proxies ' +
          'of one cluster, certificates from the cluster CA); remove this key and set peer_listen_addr',
      );
      continue;
    }
    if (typeof raw === 'string' && isTunnelUpstream(raw.trim())) {
      try {
        out[protocol] = parseTunnelUpstream(raw.trim());
      } catch (err) {
        c.fail(at, `expected tunnel:<agent>/<host:port>: ${(err as Error).message}`);
      }
      continue;
    }
    const address = c.address(raw, at, 'host:port, [IPv6]:port or tunnel:<agent>/<host:port>', {});
    if (address) out[protocol] = address;
  }
  return out;
}

function readJoinToken(c: Checker, item: unknown, path: PathSegment[]): JoinTokenConfig | undefined {
  if (!isPlainMap(item))
    return c.fail(path, `expected a mapping with token (and optionally agents, expires, max_uses), got ${describe(item)}`);
  c.keys(item, JOIN_TOKEN_KEYS, path);
  // Never echo the token itself in a message: configuration errors are printed and logged.
  const token = typeof item.token === 'string' ? item.token.trim() : undefined;
  if (token === undefined) return c.fail([...path, 'token'], 'expected a secret string');
  if (token.length < 16)
    return c.fail([...path, 'token'], `expected at least 16 characters (got ${token.length}): a join token is a secret`);
  const agents: string[] = [];
  if (item.agents !== undefined) {
    const list = typeof item.agents === 'string' ? [item.agents] : item.agents;
    if (!Array.isArray(list)) return c.fail([...path, 'agents'], `expected a list of agent names, got ${describe(item.agents)}`);
    list.forEach((name, index) => {
      if (typeof name === 'string' && isValidAgentName(name)) agents.push(name);
      else c.fail([...path, 'agents', index], `expected an agent name (letters, digits, . _ -), got ${describe(name)}`);
    });
  }
  let expiresAt: number | undefined;
  if (item.expires !== undefined) {
    // YAML reads an unquoted timestamp as a Date; a quoted one is a string.
    const ms =
      item.expires instanceof Date ? item.expires.getTime() : typeof item.expires === 'string' ? Date.parse(item.expires) : Number.NaN;
    if (Number.isNaN(ms))
      return c.fail([...path, 'expires'], `expected an RFC 3339 time such as 2026-12-31T00:00:00Z, got ${describe(item.expires)}`);
    expiresAt = ms;
  }
  let maxUses: number | undefined;
  if (item.max_uses !== undefined) {
    if (typeof item.max_uses !== 'number' || !Number.isSafeInteger(item.max_uses) || item.max_uses < 1) {
      return c.fail([...path, 'max_uses'], `expected a whole number >= 1, got ${describe(item.max_uses)}`);
    }
    maxUses = item.max_uses;
  }
  return { token, agents, expiresAt, maxUses };
}

function readAgentAuth(c: Checker, auth: Record<string, unknown>): AgentAuthConfig {
  const path: PathSegment[] = ['auth_service'];
  const joinTokens: JoinTokenConfig[] = [];
  if (auth.join_tokens !== undefined) {
    if (!Array.isArray(auth.join_tokens)) {
      c.fail([...path, 'join_tokens'], `expected a list of {token, agents, expires, max_uses}, got ${describe(auth.join_tokens)}`);
    } else {
      const seen = new Set<string>();
      auth.join_tokens.forEach((item, index) => {
        const token = readJoinToken(c, item, [...path, 'join_tokens', index]);
        if (!token) return;
        if (seen.has(token.token)) c.fail([...path, 'join_tokens', index, 'token'], 'the same token is listed twice');
        seen.add(token.token);
        joinTokens.push(token);
      });
    }
  }
  const certificateTtlMs = c.duration(auth.agent_certificate_ttl, [...path, 'agent_certificate_ttl'], DEFAULT_AGENT_CERTIFICATE_TTL_MS, {
    min: MIN_AGENT_CERTIFICATE_TTL_MS,
  });
  const revokedSerials: string[] = [];
  if (auth.revoked_agent_certificates !== undefined) {
    const list = auth.revoked_agent_certificates;
    if (!Array.isArray(list)) {
      c.fail([...path, 'revoked_agent_certificates'], `expected a list of certificate serial numbers (hex), got ${describe(list)}`);
    } else {
      list.forEach((serial, index) => {
        // Accept the colon-separated form `openssl x509 -serial` and browsers print.
        const hex = typeof serial === 'string' ? serial.replace(/:/g, '').trim().toLowerCase() : '';
        if (/^[0-9a-f]{1,64}$/.test(hex)) revokedSerials.push(hex.replace(/^0+(?=.)/, ''));
        else c.fail([...path, 'revoked_agent_certificates', index], `expected a serial number in hex, got ${describe(serial)}`);
      });
    }
  }
  const bodyTimeoutMs = c.duration(auth.join_body_timeout, [...path, 'join_body_timeout'], DEFAULT_JOIN_LIMITS.bodyTimeoutMs, {
    min: MIN_DEADLINE_MS,
    max: 60_000,
  });
  const limits = {
    join: readRateLimit(c, auth.join_rate_limit, [...path, 'join_rate_limit'], DEFAULT_JOIN_LIMITS.join),
    renew: readRateLimit(c, auth.renew_rate_limit, [...path, 'renew_rate_limit'], DEFAULT_JOIN_LIMITS.renew),
    bodyTimeoutMs,
  };
  // The development token exists so a laptop's first agent can join: once the operator has
  // written tokens of their own it is off unless asked for (issue 37).
  let developmentToken = joinTokens.length === 0;
  if (auth.development_token !== undefined) {
    if (typeof auth.development_token === 'boolean') developmentToken = auth.development_token;
    else c.fail([...path, 'development_token'], `expected true or false, got ${describe(auth.development_token)}`);
  }
  return { joinTokens, developmentToken, certificateTtlMs, revokedSerials, limits };
}

/** `{burst, per_minute}`: whole numbers, burst at least 1; either may be left out for its default. */
function readRateLimit(c: Checker, value: unknown, path: PathSegment[], fallback: RateLimit): RateLimit {
  if (value === undefined) return fallback;
  if (!isPlainMap(value)) {
    c.fail(path, `expected a mapping {burst, per_minute}, got ${describe(value)}`);
    return fallback;
  }
  c.keys(value, RATE_LIMIT_KEYS, path);
  const count = (raw: unknown, key: string, min: number, fallbackValue: number): number => {
    if (raw === undefined) return fallbackValue;
    if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= min) return raw;
    c.fail([...path, key], `expected a whole number >= ${min}, got ${describe(raw)}`);
    return fallbackValue;
  };
  return { burst: count(value.burst, 'burst', 1, fallback.burst), perMinute: count(value.per_minute, 'per_minute', 0, fallback.perMinute) };
}

function readCount(c: Checker, value: unknown, key: string, zero: string): number {
  if (value === undefined) return 0;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  c.fail(['proxy_service', key], `expected a whole number >= 0 (0: ${zero}), got ${describe(value)}`);
  return 0;
}

/** A fraction above 0 and at most 1, written 0.8 or 80%. */
function readFraction(c: Checker, value: unknown, key: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+(\.\d+)?%$/.test(value.trim())
        ? Number.parseFloat(value) / 100
        : NaN;
  if (n > 0 && n <= 1) return n;
  c.fail(['proxy_service', key], `expected a fraction above 0 and at most 1, such as 0.8 or 80%, got ${describe(value)}`);
  return fallback;
}

/** The top-level `cluster` section: the route store and how long this proxy's records live. */
function readCluster(c: Checker, value: unknown): ClusterConfig {
  const path: PathSegment[] = ['cluster'];
  const section = c.section(value, path) ?? {};
  c.keys(section, CLUSTER_KEYS, path);
  let store: ClusterConfig['store'] = { kind: 'memory' };
  if (section.store !== undefined) {
    const expected = 'memory, redis://[:password@]host[:port][/db] or rediss://…';
    if (typeof section.store !== 'string') {
      c.fail([...path, 'store'], `expected ${expected}, got ${describe(section.store)}`);
    } else {
      const result = parseStoreUrl(section.store);
      // The reason never repeats the value: it may hold the Redis password.
      if (result.ok) store = result.store;
      else c.fail([...path, 'store'], `expected ${expected}: ${result.reason}`);
    }
  }
  let storeCaFile: string | undefined;
  if (section.store_ca_file !== undefined) {
    storeCaFile = c.string(section.store_ca_file, [...path, 'store_ca_file'], 'a PEM file path');
    if (storeCaFile !== undefined && !(store.kind === 'redis' && store.tls)) {
      c.fail([...path, 'store_ca_file'], 'only read with store: rediss://… (TLS to Redis)');
    }
  }
  const presenceTtlMs = c.duration(section.presence_ttl, [...path, 'presence_ttl'], DEFAULT_PRESENCE_TTL_MS, {
    min: MIN_PRESENCE_TTL_MS,
    why: 'the proxy refreshes its records every third of it',
  });
  if (presenceTtlMs > AIMED_PRESENCE_TTL_MS) {
    c.warn(
      [...path, 'presence_ttl'],
      `a crashed proxy is dialled until its presence expires; above ${AIMED_PRESENCE_TTL_MS / 1000}s that is longer than clients usually wait`,
    );
  }
  return { store, storeCaFile, presenceTtlMs };
}

/** `peer_public_addr`: what other proxies dial, so never a wildcard (0.0.0.0 only means "every interface" to a listener). */
function readPeerPublicAddr(c: Checker, value: unknown): HostPort | undefined {
  if (value === undefined) return undefined;
  const path = ['proxy_service', 'peer_public_addr'];
  const address = c.address(value, path, 'host[:port] other proxies can dial', { defaultPort: LEGACY_PORTS.peer });
  if (address && isWildcardHost(address.host)) {
    return c.fail(path, `expected an address other proxies can dial, got the wildcard ${address.host}`);
  }
  return address;
}

/** Two listeners collide when they share a port and their hosts overlap (equal, or one a wildcard). */
function overlaps(a: HostPort, b: HostPort): boolean {
  if (a.port === 0 || b.port === 0 || a.port !== b.port) return false;
  return a.host === b.host || isWildcardHost(a.host) || isWildcardHost(b.host);
}

function checkListeners(c: Checker, config: GateConfig): void {
  const proxy = config.proxy;
  for (const protocol of UPSTREAM_PROTOCOLS) {
    const key = LISTEN_ADDR_KEYS[protocol];
    if (proxy.listenAddrs[protocol] === undefined) continue;
    if (!hasOwnPort(protocol, config)) {
      c.warn(
        ['proxy_service', key],
        `ignored in multiplex mode: ${protocol} is served on web_listen_addr (set auth_service.proxy_listener_mode: separate to use it)`,
      );
    } else if (!protocolEnabled(config, protocol)) {
      c.warn(['proxy_service', key], `ignored: proxy_service.upstreams.${protocol} is not set, so ${protocol} is off`);
    }
  }
  // Each own-port listener against the web one and against each other.
  const taken: Array<{ key: string; address: HostPort }> = [{ key: 'web_listen_addr', address: proxy.webListenAddr }];
  for (const protocol of UPSTREAM_PROTOCOLS) {
    if (!hasOwnPort(protocol, config)) continue;
    const address = listenAddressFor(config, protocol);
    if (!address) continue;
    const key = LISTEN_ADDR_KEYS[protocol];
    const clash = taken.find((other) => overlaps(other.address, address));
    if (clash) {
      const implicit = proxy.listenAddrs[protocol] === undefined ? ' (its default)' : '';
      c.fail(
        ['proxy_service', key],
        `expected an address of its own, but ${formatAddress(address)}${implicit} is also proxy_service.${clash.key}`,
      );
    } else {
      taken.push({ key, address });
    }
  }
  // The diagnostics listener answers anyone who reaches it, in plain HTTP: on a public listener's
  // address it would either fail to bind or, worse, expose /metrics where clients connect.
  if (config.diagAddr) {
    const clash = taken.find((other) => overlaps(other.address, config.diagAddr!));
    if (clash) {
      c.fail(
        ['diag_addr'],
        `expected an address of its own, never a public listener's: ${formatAddress(config.diagAddr)} is also proxy_service.${clash.key} (use e.g. 127.0.0.1:3000)`,
      );
    }
  }
}

/** 127.0.0.0/8, ::1 (or its IPv4-mapped form of a loopback address) and `localhost`: reached from this host only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Validates a parsed configuration document. `raw` is the YAML value (undefined for an empty file). */
export function validateConfig(raw: unknown, source: string): ValidationResult {
  const c = new Checker();
  const top = c.section(raw, []);
  if (!top) return { config: undefined, issues: c.issues, warnings: c.warnings };
  c.keys(top, TOP_KEYS, []);

  let version: string | undefined;
  if (top.version !== undefined) {
    // Only the platform's current file format is read; older ones default differently.
    if (top.version === 'v3') version = 'v3';
    else c.fail(['version'], `expected "v3" (the only file version gate reads), got ${describe(top.version)}`);
  }
  const dataDir = top.data_dir === undefined ? undefined : c.string(top.data_dir, ['data_dir'], 'a directory path');
  // No default host: where the load balancer's health checks come from is the operator's choice.
  const diagAddr =
    top.diag_addr === undefined ? undefined : c.address(top.diag_addr, ['diag_addr'], 'host:port or [IPv6]:port', { allowZeroPort: true });

  const auth = c.section(top.auth_service, ['auth_service']) ?? {};
  c.keys(auth, AUTH_KEYS, ['auth_service']);
  const listenerMode = readListenerMode(c, auth);
  const agents = readAgentAuth(c, auth);

  const p = c.section(top.proxy_service, ['proxy_service']) ?? {};
  c.keys(p, PROXY_KEYS, ['proxy_service']);
  const at = (key: string): PathSegment[] => ['proxy_service', key];

  const listenExpected = 'host:port, [IPv6]:port or :port';
  const listenOptions: ParseAddressOptions = { defaultHost: '0.0.0.0', allowZeroPort: true };
  const webListenAddr = c.address(p.web_listen_addr ?? DEFAULT_WEB_LISTEN, at('web_listen_addr'), listenExpected, listenOptions) ?? {
    host: '0.0.0.0',
    port: LEGACY_PORTS.web,
  };

  const listenAddrs: Partial<Record<UpstreamProtocol, HostPort>> = {};
  for (const protocol of UPSTREAM_PROTOCOLS) {
    const key = LISTEN_ADDR_KEYS[protocol];
    if (p[key] === undefined) continue;
    const address = c.address(p[key], at(key), listenExpected, listenOptions);
    if (address) listenAddrs[protocol] = address;
  }

  // A public address without a port means the port that protocol is served on: the web port when
  // multiplexed, its legacy port otherwise.
  const webPort = webListenAddr.port === 0 ? LEGACY_PORTS.web : webListenAddr.port;
  const publicPort = (protocol: UpstreamProtocol): number => (listenerMode === 'multiplex' ? webPort : LEGACY_PORTS[protocol]);

  const proxy: ProxyServiceConfig = {
    webListenAddr,
    publicAddrs: c.addressList(p.public_addr, at('public_addr'), webPort),
    sshPublicAddrs: c.addressList(p.ssh_public_addr, at('ssh_public_addr'), publicPort('ssh')),
    tunnelPublicAddrs: c.addressList(p.tunnel_public_addr, at('tunnel_public_addr'), publicPort('tunnel')),
    kubePublicAddrs: c.addressList(p.kube_public_addr, at('kube_public_addr'), publicPort('kube')),
    postgresPublicAddrs: c.addressList(p.postgres_public_addr, at('postgres_public_addr'), publicPort('postgres')),
    mysqlPublicAddrs: c.addressList(p.mysql_public_addr, at('mysql_public_addr'), publicPort('mysql')),
    listenAddrs,
    httpsKeypairs: readKeypairs(c, p.https_keypairs),
    proxyProtocol: readProxyProtocol(c, p.proxy_protocol),
    proxyProtocolTrustedNetworks: readTrustedNetworks(c, p.proxy_protocol_trusted_networks),
    // X-Forwarded-For is believed from nobody unless listed: any client can send one.
    connectionUpgradeTrustedNetworks: readTrustedNetworks(
      c,
      p.connection_upgrade_trusted_networks,
      'connection_upgrade_trusted_networks',
      [],
    ),
    // Above 0: a load balancer's idle timeout would cut quiet upgraded connections.
    connectionUpgradePingIntervalMs: c.duration(
      p.connection_upgrade_ping_interval,
      at('connection_upgrade_ping_interval'),
      DEFAULT_UPGRADE_PING_INTERVAL_MS,
      { min: MIN_DEADLINE_MS, why: 'pings keep quiet upgraded connections through the balancer' },
    ),
    automaticUpgradesChannels: readChannels(c, p.automatic_upgrades_channels),
    clusterMaintenanceConfig: readMaintenanceConfig(c, p.cluster_maintenance_config),
    upstreams: readUpstreams(c, p.upstreams),
    detectTimeoutMs: c.duration(p.detect_timeout, at('detect_timeout'), MUX_DEFAULTS.detectTimeoutMs, {
      min: MIN_DEADLINE_MS,
      why: 'detection must be bounded, and a shorter one cuts real clients',
    }),
    idleTimeoutMs: c.duration(p.idle_timeout, at('idle_timeout'), 0, { min: MIN_DEADLINE_MS, zero: true }),
    webHeadersTimeoutMs: c.duration(p.web_headers_timeout, at('web_headers_timeout'), DEFAULT_WEB_HEADERS_TIMEOUT_MS, {
      min: MIN_DEADLINE_MS,
      max: MAX_WEB_DEADLINE_MS,
    }),
    webRequestTimeoutMs: c.duration(p.web_request_timeout, at('web_request_timeout'), DEFAULT_WEB_REQUEST_TIMEOUT_MS, {
      min: MIN_DEADLINE_MS,
      max: MAX_WEB_DEADLINE_MS,
    }),
    maxConnections: readCount(c, p.max_connections, 'max_connections', 'what the open-file limit carries'),
    maxConnectionsPerSource: readCount(c, p.max_connections_per_source, 'max_connections_per_source', 'none'),
    highWater: readFraction(c, p.high_water, 'high_water', DEFAULT_HIGH_WATER),
    sourceShare: readFraction(c, p.source_share, 'source_share', DEFAULT_SOURCE_SHARE),
    peerPublicAddr: readPeerPublicAddr(c, p.peer_public_addr),
  };
  if (proxy.webRequestTimeoutMs < proxy.webHeadersTimeoutMs) {
    c.fail(
      at('web_request_timeout'),
      `expected at least web_headers_timeout (${formatDuration(proxy.webHeadersTimeoutMs)}): the request includes its headers`,
    );
  }

  if (proxy.publicAddrs.length > 1) {
    c.warn(
      at('public_addr'),
      `${proxy.publicAddrs.length} addresses given; clients are sent to the first (${formatAddress(proxy.publicAddrs[0] as HostPort)}), which must be reachable by all of them`,
    );
  }

  const cluster = readCluster(c, top.cluster);
  const diagTokenFile = top.diag_token_file === undefined ? undefined : c.string(top.diag_token_file, ['diag_token_file'], 'a file path');
  if (diagTokenFile && !diagAddr) c.warn(['diag_token_file'], 'read only with diag_addr, which is not set');
  const config: GateConfig = { source, version, dataDir, listenerMode, agents, proxy, cluster, diagAddr, diagTokenFile };
  if (c.issues.length === 0) checkListeners(c, config);
  if (diagAddr && !diagTokenFile && !isLoopbackHost(diagAddr.host)) {
    // The listener serves the fleet's inventory (host names, versions, server IDs) and every
    // counter: off this host only behind a key (issue 37).
    c.fail(
      ['diag_addr'],
      `${formatAddress(diagAddr)} is not a loopback address: set diag_token_file (a bearer token /metrics and /v1/inventory ask for), or use e.g. 127.0.0.1:${diagAddr.port}`,
    );
  }
  if (proxy.proxyProtocol === 'on' && p.proxy_protocol_trusted_networks === undefined) {
    // Compatible with the platform, but on a port the internet reaches directly anyone could claim
    // any client address: say so (SECURITY.md, "Operator caveat").
    c.warn(
      ['proxy_service', 'proxy_protocol_trusted_networks'],
      "not set, so PROXY headers are accepted from every source; list the load balancers' networks unless only they can reach this port",
    );
  }
  return { config: c.issues.length === 0 ? config : undefined, issues: c.issues, warnings: c.warnings };
}
