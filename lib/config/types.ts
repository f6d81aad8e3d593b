import type { HostPort } from './address.js';
import type { ChannelConfig } from './channel.js';
import type { MaintenanceConfig } from './maintenance-schedule.js';
import type { JoinTokenRule } from '../vocabulary/join-token-rule.js';

/**
 * `multiplex`: one port (web_listen_addr) serves every protocol, routed by TLS SNI/ALPN or plaintext
 * greeting ("TLS routing"). `separate`: each protocol also gets its own legacy port.
 */
export type ListenerMode = 'multiplex' | 'separate';

/** Protocols the proxy hands to an upstream (everything but web, which it serves itself). */
// The union is spelled out (not derived from the list with `typeof`) so that the public type does
// not name the list, which only gate-mux/internal exports (issue 39); `satisfies` and the
// statement below keep the two the same at compile time.
export type UpstreamProtocol = 'ssh' | 'tunnel' | 'kube' | 'postgres' | 'mysql' | 'mongodb' | 'redis' | 'peer';
export const UPSTREAM_PROTOCOLS = [
  'ssh',
  'tunnel',
  'kube',
  'postgres',
  'mysql',
  'mongodb',
  'redis',
  'peer',
] as const satisfies readonly UpstreamProtocol[];
true satisfies [UpstreamProtocol] extends [(typeof UPSTREAM_PROTOCOLS)[number]] ? true : never;

/** Every route the proxy knows (docs/ARCHITECTURE.md, "The wire contract"). */
export type ProxyProtocolName = 'web' | UpstreamProtocol;

/**
 * An upstream reached through an agent's reverse tunnel (`tunnel:<agent>/<host:port>`): `target`
 * is dialled by the agent, in its own network, if its allow-list has it.
 */
export interface AgentUpstream {
  agent: string;
  /** `host:port` (IPv6 bracketed) as the agent dials it. */
  target: string;
}

/** Where a protocol's traffic goes: an address the proxy dials, or a target behind an agent. */
export type Upstream = HostPort | AgentUpstream;

export function isAgentUpstream(upstream: Upstream): upstream is AgentUpstream {
  return 'agent' in upstream;
}

import type { JoinLimits } from '../vocabulary/join-limits.js';

/** A join token from the configuration (`auth_service.join_tokens`): what lib/tunnel's JoinTokens accepts. */
export type JoinTokenConfig = JoinTokenRule;

/** How agents join and how long their certificates live (`auth_service`). */
export interface AgentAuthConfig {
  joinTokens: JoinTokenConfig[];
  /**
   * Whether the development token (`<data_dir>/join-token`) is accepted (`development_token`);
   * default: only when no static token is configured.
   */
  developmentToken: boolean;
  /** Lifetime of an agent certificate; agents renew at two thirds of it. Default 1 h. */
  certificateTtlMs: number;
  /** Serial numbers (lower-case hex) of agent certificates the tunnel route refuses. */
  revokedSerials: string[];
  /** Per-source rate limits on join and renewal, and the body deadline (`join_rate_limit`, `renew_rate_limit`, `join_body_timeout`). */
  limits: JoinLimits;
}

export interface KeyPairFiles {
  certFile: string;
  keyFile: string;
}

export interface ProxyServiceConfig {
  /** The web port; in multiplex mode the one port for everything. Default `0.0.0.0:3080`. */
  webListenAddr: HostPort;
  /** Addresses clients use to reach the proxy (first one is advertised). Port defaults to the web port. */
  publicAddrs: HostPort[];
  sshPublicAddrs: HostPort[];
  tunnelPublicAddrs: HostPort[];
  kubePublicAddrs: HostPort[];
  postgresPublicAddrs: HostPort[];
  mysqlPublicAddrs: HostPort[];
  /**
   * Per-protocol listen addresses as written in the file (`listen_addr` is SSH's). Only used in
   * separate mode (peer in both); `listenAddressFor` applies the legacy defaults.
   */
  listenAddrs: Partial<Record<UpstreamProtocol, HostPort>>;
  httpsKeypairs: KeyPairFiles[];
  /** `on`: every connection must start with a PROXY header from a trusted network. */
  proxyProtocol: 'on' | 'off';
  /** CIDRs a PROXY header is accepted from when `proxyProtocol` is `on` (default: everywhere). */
  proxyProtocolTrustedNetworks: string[];
  /**
   * Load balancers whose `X-Forwarded-For` names the client of a connection upgrade (CIDRs;
   * default none: the address the upgrade came from is the client's).
   */
  connectionUpgradeTrustedNetworks: string[];
  /** WebSocket pings on `alpn-ping` connection upgrades (default 15 s). */
  connectionUpgradePingIntervalMs: number;
  /** Configured channels by name; `default` is added by the version-channel registry when absent. */
  automaticUpgradesChannels: Record<string, ChannelConfig>;
  /** The agents' maintenance schedule, served for `gate-upgrade export-schedule`; undefined: none. */
  clusterMaintenanceConfig: MaintenanceConfig | undefined;
  /**
   * Where each protocol's traffic goes. A protocol without an upstream is not routed at all, except
   * `tunnel`, which has none: the proxy itself hosts agents' reverse tunnels.
   */
  upstreams: Partial<Record<UpstreamProtocol, Upstream>>;
  /** Deadline for detecting a connection's protocol, PROXY header included. Default 10 s. */
  detectTimeoutMs: number;
  /** Idle timeout for routed connections; 0 is none (the default). */
  idleTimeoutMs: number;
  /** The web endpoints' deadline for a request's headers (default 10 s; lib/web/request-deadlines.ts). */
  webHeadersTimeoutMs: number;
  /** The web endpoints' deadline for a whole request (default 30 s). */
  webRequestTimeoutMs: number;
  /**
   * Open connections allowed at once, over every listener; 0 (the default) is what the open-file
   * limit carries (two descriptors per connection after a reserve; lib/mux/descriptor-limit.ts).
   */
  maxConnections: number;
  /** Open connections allowed from one client address at any load; 0 is no such limit (the default). */
  maxConnectionsPerSource: number;
  /** Fraction of the cap (0 < x <= 1) above which one address is held to `sourceShare` (default 0.8). */
  highWater: number;
  /** Fraction of the cap (0 < x <= 1) one address may hold above the high-water mark (default 0.1). */
  sourceShare: number;
  /**
   * What other proxies dial for peering (`peer_public_addr`); undefined: the peer listener's bound
   * address (a wildcard host replaced by this machine's host name).
   */
  peerPublicAddr: HostPort | undefined;
}

/**
 * Where a proxy's route store lives (`cluster.store`): this process's memory (the default: one
 * proxy, nothing to run), or a Redis server that every proxy of the cluster shares.
 */
export type StoreConfig =
  | { kind: 'memory' }
  | {
      kind: 'redis';
      /** `rediss://`: TLS to Redis, verified against `cluster.store_ca_file` or the system CAs. */
      tls: boolean;
      host: string;
      port: number;
      /** Redis 6 ACL user, when the URL names one. */
      username: string | undefined;
      /** Never logged: `label` is what messages show. */
      password: string | undefined;
      db: number;
      /** The URL with any password replaced by `***`, for messages and logs. */
      label: string;
    };

/** The top-level `cluster` section: several proxies sharing one route store. */
export interface ClusterConfig {
  store: StoreConfig;
  /** PEM file of the CA that signed the Redis server's certificate (`rediss://` only). */
  storeCaFile: string | undefined;
  /** Lifetime of this proxy's presence and tunnel records; refreshed every third of it. Default 10 s. */
  presenceTtlMs: number;
}

export interface GateConfig {
  /** The file (or label) the configuration came from, for messages. */
  source: string;
  /** The top-level `version`, when given (only `v3` is accepted). */
  version: string | undefined;
  /** Where the proxy keeps state such as its development CA; as written (relative to the working directory). */
  dataDir: string | undefined;
  /** From `auth_service.proxy_listener_mode`. */
  listenerMode: ListenerMode;
  /** Join tokens, agent certificate lifetime and revocations (from `auth_service`). */
  agents: AgentAuthConfig;
  proxy: ProxyServiceConfig;
  /** The route store and membership settings (defaults: memory, 10 s). */
  cluster: ClusterConfig;
  /**
   * Top-level `diag_addr`: the plain-HTTP listener for /healthz, /readyz and /metrics,
   * never one of the public listeners' addresses. Undefined (the default): not served.
   */
  diagAddr: HostPort | undefined;
  /**
   * Top-level `diag_token_file`: a file holding the bearer token `/metrics` and `/v1/inventory`
   * ask for; required when `diagAddr` is not a loopback address.
   */
  diagTokenFile: string | undefined;
}

export interface LoadedConfig {
  config: GateConfig;
  /** Things that are allowed but probably not meant, each naming its key path. */
  warnings: string[];
}
