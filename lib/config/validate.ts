import { formatAddress, isWildcardHost, type HostPort, type ParseAddressOptions } from './address.js';
import { formatDuration } from './duration.js';
import { LEGACY_PORTS, LISTEN_ADDR_KEYS, hasOwnPort, listenAddressFor, protocolEnabled } from './listen-addresses.js';
import {
  DEFAULT_UPGRADE_PING_INTERVAL_MS,
  DEFAULT_WEB_HEADERS_TIMEOUT_MS,
  DEFAULT_WEB_LISTEN,
  DEFAULT_WEB_REQUEST_TIMEOUT_MS,
  MAX_WEB_DEADLINE_MS,
} from './gate-schema.js';
import { DEFAULT_HIGH_WATER, DEFAULT_SOURCE_SHARE } from '../mux/connection-budget.js';
import { MUX_DEFAULTS } from '../mux/options.js';
import { UPSTREAM_PROTOCOLS, type GateConfig, type ProxyServiceConfig, type UpstreamProtocol } from './types.js';
import { Checker, describe, MIN_DEADLINE_MS, type ConfigIssue, type PathSegment } from './checker.js';
import { AUTH_KEYS, PROXY_KEYS, TOP_KEYS } from './gate-keys.js';
import { readAgentAuth, readListenerMode } from './validate-auth.js';
import {
  readChannels,
  readCount,
  readFraction,
  readKeypairs,
  readMaintenanceConfig,
  readProxyProtocol,
  readTrustedNetworks,
  readUpstreams,
} from './validate-proxy.js';
import { readCluster, readPeerPublicAddr } from './validate-cluster.js';
/**
 * Hand-written validation of the parsed YAML value. Every problem is recorded with its key path and
 * what was expected; all problems are collected (not just the first) so one edit fixes a file.
 */

export interface ValidationResult {
  /** Present only when there are no issues. */
  config: GateConfig | undefined;
  issues: ConfigIssue[];
  warnings: ConfigIssue[];
}

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
