// What a user of the agent sees: its options, its events and the running agent (agent.ts runs it).
import type { LastUpdate } from '../updater/last-update.js';
import type { EventEmitter } from 'node:events';
import type { ConnectionUpgradeDial } from '../client/dial-tls.js';
import type { ProxyConfig } from '../client/proxy-config.js';
import type { GateError } from '../errors.js';
import type { Closable, CloseOptions, LifecycleState } from '../lifecycle.js';
import type { Logger } from '../log.js';
import type { AgentDescription } from './agent-description.js';
import type { BackoffOptions } from './backoff.js';

export interface AgentOptions {
  /** The proxy's tunnel endpoint, `host:port` (the shared port, or the legacy tunnel port). */
  proxy: string;
  /** The agent's name. Must be the name its certificate carries (CN, else first DNS SAN). */
  name: string;
  /** Client certificate and key issued by the proxy's CA (`ca.issue({commonName: name, usage: 'client'})`). */
  cert: string | Buffer;
  key: string | Buffer;
  /** CA that signed the proxy's server certificate. */
  ca: string | Buffer | Array<string | Buffer>;
  /** SNI and the name the proxy's certificate is checked against (default: the proxy host). */
  serverName?: string;
  /** Where HTTPS_PROXY / HTTP_PROXY / NO_PROXY come from (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Override the environment: the proxy to dial through, or null for direct. */
  dialProxy?: ProxyConfig | null;
  /**
   * Through a load balancer that ends TLS, the tunnel's TLS goes inside a WebSocket connection
   * upgrade; detected by default (client/dial-tls.ts). Here only to force it or to trust a
   * balancer's certificate outside the system store.
   */
  connectionUpgrade?: ConnectionUpgradeDial;
  /** Targets (`host:port`) this agent serves. Ignored when `allow` is given. */
  resources?: string[];
  /** Policy for targets the proxy asks for. Default: exactly `resources`; nothing else. */
  allow?: (target: string) => boolean;
  logger?: Logger;
  /** Deadline for dialling the proxy and the TLS handshake (default 10 s). */
  dialTimeoutMs?: number;
  /** Deadline for the TCP connect to a target (default 10 s). */
  targetDialTimeoutMs?: number;
  /**
   * Streams the proxy may hold open at once on one tunnel (default 1000, TUNNEL_MAX_STREAMS): an
   * open past it is refused and counted against the proxy's rapid-reset budget. The agent tells
   * the proxy in its HELLO, and the proxy keeps its client streams a few below it.
   */
  maxStreams?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** Reconnect backoff (default 0.5 s growing to 30 s, full jitter). */
  backoff?: BackoffOptions;
  /** A session that stayed up this long resets the backoff (default 10 s). */
  stableAfterMs?: number;
  /** Source of jitter, [0, 1) (default Math.random). */
  random?: () => number;
  /**
   * Tunnels to keep, each to a distinct proxy of a cluster (default 2). Proxies say which one a
   * tunnel landed on and which proxies exist; with fewer proxies the agent holds one per proxy,
   * and with a proxy that says nothing (on its own, or older) it holds one tunnel.
   */
  connectionCount?: number;
  /** The services it provides, for the inventory (the tunnel's policy is `resources` / `allow`). */
  services?: Array<{ kind: string; name: string }>;
  /** Default: the machine's host name. */
  hostname?: string;
  /** The version it reports, which the proxy checks against its own (default: this package's). */
  version?: string;
  /** The rollout group it reports (`updater.group` of agent.yaml; default `default`). */
  updateGroup?: string;
}

export interface AgentConnectedEvent {
  /** The environment proxy the tunnel went through, redacted, or `direct`. */
  via: string;
  /** How many times a tunnel has come up, this one included. */
  connections: number;
  /** The proxy this tunnel landed on, when the proxy said (a proxy of a cluster does). */
  proxyId?: string;
}

/** One tunnel the agent holds. */
export interface AgentTunnelInfo {
  /** The proxy it landed on, when the proxy said. */
  proxyId?: string;
  via: string;
  /** Epoch milliseconds its dial began. */
  since: number;
}

/**
 * A running agent: up to `connectionCount` tunnels, each to a distinct proxy. Events, per tunnel:
 * `connected` (AgentConnectedEvent) once the proxy has registered it (the answer to a first PING
 * arrived, and the proxy's verdict on its description); `disconnected` ({reason, proxyId?}) when it stops taking streams;
 * `refused` (GateError) when a proxy refuses a tunnel, with the proxy's code
 * (GATE_ERR_AGENT_CERT_EXPIRED, _REVOKED, _UNTRUSTED, GATE_ERR_AGENT_DUPLICATE, ...; a duplicate
 * while the agent holds tunnels is a dial that landed on a proxy it holds, and is simply retried).
 */
export interface TunnelAgent extends EventEmitter, Closable {
  readonly name: string;
  /** True while at least one tunnel is up. */
  readonly connected: boolean;
  /** Times a tunnel has come up so far. */
  readonly connections: number;
  /** Tunnels it keeps when the proxies allow (the `connectionCount` option). */
  readonly connectionCount: number;
  /** The tunnels up now. */
  readonly tunnels: AgentTunnelInfo[];
  /** The proxies of the cluster from the latest list a proxy sent (sorted), or undefined before any. */
  readonly proxies: string[] | undefined;
  /**
   * Tunnels dialled so far, and how many of them landed on a proxy the agent already held (refused
   * there with GATE_ERR_AGENT_DUPLICATE, or closed by the agent when the proxy named itself).
   */
  readonly dials: number;
  readonly duplicates: number;
  /** Target connections open right now. */
  readonly openStreams: number;
  /** Streams the proxy has opened in this agent's tunnels so far. */
  readonly streamsServed: number;
  /** Resolves once the tunnel is up (at once if it is); rejects after `timeoutMs`. */
  waitConnected(timeoutMs?: number): Promise<AgentConnectedEvent>;
  /** open, closing (close() called), closed (everything released). */
  readonly state: LifecycleState;
  /**
   * Stops reconnecting and destroys the session, its streams and their target sockets. With
   * `graceMs`, first closes the tunnel cleanly: GOAWAY (NO_ERROR) so the proxy stops opening
   * streams and frees the name at once, then up to `graceMs` for open streams to finish. A second
   * call returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>;
  /** Stops now: every tunnel and target socket destroyed (streams reset with `err`, default GATE_ERR_SHUTDOWN). */
  destroy(err?: GateError): void;
  /** @deprecated Use `close(options)`: the same call under its old name, kept for one release. */
  stop(options?: CloseOptions): Promise<void>;
  /** Use this certificate and key from the next tunnel connection on (after a renewal). */
  setIdentity(identity: { cert: string | Buffer; key: string | Buffer }): void;
  /** What it tells the proxies about itself (the inventory's row). */
  readonly description: AgentDescription;
  /** Changes the services it reports; the proxies it holds tunnels to are told at once. */
  setServices(services: Array<{ kind: string; name: string }>): void;
  /** Sets (or clears) what its updater's latest install came to, and describes itself again. */
  setLastUpdate(update: LastUpdate | undefined): void;
}
