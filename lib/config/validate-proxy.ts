import { isCidr } from './address.js';
import { channelNameProblem, normalizeVersion, type ChannelConfig } from './channel.js';
import { checkAgentUpgrades, type MaintenanceConfig } from './maintenance-schedule.js';
import { isTunnelUpstream, parseTunnelUpstream } from '../vocabulary/tunnel-upstream.js';
import { UPSTREAM_PROTOCOLS, type Upstream, type KeyPairFiles, type UpstreamProtocol } from './types.js';
import { Checker, describe, isPlainMap, type PathSegment } from './checker.js';
import { CHANNEL_KEYS, KEYPAIR_KEYS, MAINTENANCE_KEYS, UPSTREAM_KEYS } from './gate-keys.js';

// gate.yaml's `proxy_service` section: certificates, PROXY protocol, version channels, the
// maintenance schedule, upstreams, and its counts and fractions.

export function readKeypairs(c: Checker, value: unknown): KeyPairFiles[] {
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

export function readProxyProtocol(c: Checker, value: unknown): 'on' | 'off' {
  // YAML 1.1 readers turn a bare `on`/`off` into booleans; accept both spellings.
  if (value === undefined || value === 'off' || value === false) return 'off';
  if (value === 'on' || value === true) return 'on';
  c.fail(['proxy_service', 'proxy_protocol'], `expected "on" or "off", got ${describe(value)}`);
  return 'off';
}

const ANY_SOURCE = ['0.0.0.0/0', '::/0'];

export function readTrustedNetworks(
  c: Checker,
  value: unknown,
  key = 'proxy_protocol_trusted_networks',
  absent: string[] = ANY_SOURCE,
): string[] {
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

export function readChannels(c: Checker, value: unknown): Record<string, ChannelConfig> {
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
export function readMaintenanceConfig(c: Checker, value: unknown): MaintenanceConfig | undefined {
  const path = ['proxy_service', 'cluster_maintenance_config'];
  if (value === undefined) return undefined;
  if (!isPlainMap(value)) return c.fail(path, `expected a mapping with agent_upgrades, got ${describe(value)}`);
  c.keys(value, MAINTENANCE_KEYS, path);
  const result = checkAgentUpgrades(value.agent_upgrades);
  if (result.ok) return result.config;
  return c.fail([...path, 'agent_upgrades', ...result.path], `expected utc_start_hour (0-23) and optional weekdays: ${result.why}`);
}

export function readForwardUrl(c: Checker, raw: unknown, path: PathSegment[], allowHttp: boolean): string | undefined {
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

export function readUpstreams(c: Checker, value: unknown): Partial<Record<UpstreamProtocol, Upstream>> {
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

export function readCount(c: Checker, value: unknown, key: string, zero: string): number {
  if (value === undefined) return 0;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  c.fail(['proxy_service', key], `expected a whole number >= 0 (0: ${zero}), got ${describe(value)}`);
  return 0;
}

/** A fraction above 0 and at most 1, written 0.8 or 80%. */
export function readFraction(c: Checker, value: unknown, key: string, fallback: number): number {
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
