import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureServer, createServer as createH2cServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { createSecureContext, type SecureContext, type Server as TlsServer } from 'node:tls';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import { ConnectionBudget, processBudget } from '../mux/connection-budget.js';
import { describeCap } from '../mux/descriptor-limit.js';
import { Multiplexer } from '../mux/multiplexer.js';
import { RouteTable } from '../mux/route-table.js';
import type { MultiplexerSettings, Route } from '../mux/types.js';
import type { StatsSnapshot } from '../mux/stats.js';
import { fetchText as fetchThroughEnvironment } from '../client/fetch-text.js';
import type { GateConfig } from '../config/types.js';
import { buildPing } from './ping.js';
import { createWebRoutes, type WebRequestHandler } from '../web/routes.js';
import { VersionChannels, type FetchText } from '../web/version-channels.js';
import { loadProxyCertificates, type ProxyCertificates } from './certificates.js';
import { planListeners, type ListenerPlan, type ListenerSpec } from './listener-plan.js';
import { routeFor, type WebServers } from './route-handlers.js';
import { caPin } from '../pki/ca-pin.js';
import { AgentAuthority } from '../tunnel/agent-authority.js';
import { DEV_TOKEN_FILE, loadDevToken } from '../tunnel/dev-token.js';
import { join } from 'node:path';
import { createJoinRoutes } from '../tunnel/join-endpoint.js';
import { JoinTokens } from '../tunnel/join-tokens.js';
import { TunnelRegistry } from '../tunnel/registry.js';
import { PeerServer } from '../cluster/peer-server.js';
import { PeerPool } from '../cluster/peer-pool.js';
import { ClusterDialer } from '../cluster/cluster-dialer.js';
import type { ClientHttp2Stream } from 'node:http2';
import type { OpenStreamOptions } from '../tunnel/registry.js';
import { formatAddress, isWildcardHost, type HostPort } from '../config/address.js';
import { channelFingerprint } from '../cluster/channel-fingerprint.js';
import { ClusterMember } from '../cluster/cluster-member.js';
import type { ProxyPresence, RouteStore } from '../cluster/route-store.js';
import { routeStoreFor } from '../cluster/store-for-config.js';
import { DiagServer } from '../cluster/diag-server.js';
import { GateMetrics } from '../cluster/metrics.js';
import { clusterReadiness, listenersReadiness, type ReadinessSource } from '../cluster/readiness.js';
import type { AddressInfo } from 'node:net';
import { ConnectionUpgrade } from '../conn-upgrade/upgrade-server.js';

export interface GateProxyOptions {
  config: GateConfig;
  /** The proxy's own version (ping's server_version, the `default` channel). */
  version: string;
  logger?: Logger;
  /** How forwarded channels are fetched; default: through HTTPS_PROXY/NO_PROXY with the dialer. */
  fetchText?: FetchText;
  /** HTTPS_PROXY / NO_PROXY for the upstream dials that honour them (Kubernetes); default `process.env`, read at each (re)load. */
  env?: NodeJS.ProcessEnv;
  /**
   * The route store shared with the other proxies of the cluster; default: the one `cluster.store`
   * names (a new MemoryRouteStore when unset). A store given here is the caller's to close.
   */
  routeStore?: RouteStore;
}

interface RunningListener {
  spec: ListenerSpec;
  mux: Multiplexer;
  port: number;
}

const defaultFetch: FetchText = (url, { timeoutMs }) => fetchThroughEnvironment(url, { timeoutMs });

/**
 * Whether a running listener can serve `spec` across a reload: the same host and silence
 * settings, and the port it asks for is the one bound (or both ask for any port, 0). The name may
 * change: the shared port is `multiplex` in one mode and `web` in the other, and a mode switch
 * keeps its bound socket instead of binding the same address twice.
 */
function serves(running: RunningListener, spec: ListenerSpec): boolean {
  const was = running.spec;
  if (was.host !== spec.host || was.silentRoute !== spec.silentRoute || was.silentAfterMs !== spec.silentAfterMs) return false;
  return spec.port === 0 ? was.port === 0 : running.port === spec.port;
}

/**
 * The multiplexer settings a configuration asks for a listener. The same for every listener but
 * the peering one, which never expects a PROXY header: `proxy_protocol` describes the load
 * balancer in front of the public ports, while proxies dial each other's peer port directly.
 */
function muxSettings(config: GateConfig, budget: ConnectionBudget, spec: ListenerSpec): MultiplexerSettings {
  const p = config.proxy;
  const proxyProtocol = p.proxyProtocol === 'on' && spec.name !== 'peer';
  return {
    detectTimeoutMs: p.detectTimeoutMs,
    idleTimeoutMs: p.idleTimeoutMs,
    maxConnectionsPerSource: p.maxConnectionsPerSource,
    proxyProtocol: proxyProtocol ? { mode: 'on', trusted: p.proxyProtocolTrustedNetworks } : { mode: 'off' },
    budget,
  };
}

/**
 * The platform's proxy front door: the configured listeners (one shared TLS-routing port, or the
 * legacy separate ports), the web endpoints served in-process (ping, version channels), and the
 * other protocols forwarded to their upstreams. `reload` swaps configuration and certificates
 * without dropping established connections.
 */
export class GateProxy {
  private config: GateConfig;
  private certificates!: ProxyCertificates;
  private channels!: VersionChannels;
  private webRoutes!: WebRequestHandler;
  private listeners: RunningListener[] = [];
  private readonly web: WebServers;
  private readonly logger: Logger;
  private secureContext!: SecureContext;
  private sniContexts = new Map<string, SecureContext>();
  /** The slots of every listener: descriptors are per process, so one budget for all of them. */
  private budget: ConnectionBudget | undefined;
  private readonly registry: TunnelRegistry;
  /** Serves other proxies' forwarded dials on the peer listener, from this proxy's tunnels only. */
  private readonly peering: PeerServer;
  /** Sessions to the other proxies, for dials whose agent another proxy holds. */
  private readonly peerPool: PeerPool;
  /** This proxy's tunnels first, then the other holders (set once the proxy joined the cluster). */
  private dialer: ClusterDialer | undefined;
  private draining = false;
  private readonly joinTokens = new JoinTokens();
  private authority!: AgentAuthority;
  private revoked = new Set<string>();
  private devTokenPath!: string;
  /** Random per process start: a restarted proxy is a new member, never mistaken for its predecessor. */
  readonly proxyId: string;
  private store!: RouteStore;
  private ownsStore = false;
  private member!: ClusterMember;
  /** Prometheus metrics, served on `diag_addr`; peering and the route store report through it too. */
  readonly metrics = new GateMetrics();
  /** The diagnostics listener, while `diag_addr` is set; `diagSpec` is the address it was asked for. */
  private diag: { server: DiagServer; spec: HostPort } | undefined;
  /** What /readyz asks: the listeners, and whatever `addReadiness` adds (the cluster member). */
  private readonly readiness: ReadinessSource[] = [];
  /** Listeners being closed (dropped by a reload, or by close()): still counted in the metrics until they are gone. */
  private readonly retiring = new Set<Multiplexer>();
  private closing = false;
  /** TLS routing through load balancers that end TLS: upgraded streams go to the shared port's multiplexer. */
  private readonly upgrade: ConnectionUpgrade;

  private constructor(private readonly options: GateProxyOptions) {
    this.proxyId = randomUUID();
    this.config = options.config;
    this.logger = componentLogger(options.logger, 'proxy');
    this.registry = new TunnelRegistry({
      ...(options.logger ? { logger: options.logger } : {}),
      isRevoked: (serial) => this.revoked.has(serial),
    });
    this.peering = new PeerServer({ registry: this.registry, isDraining: () => this.draining, ...(options.logger ? { logger: options.logger } : {}) });
    this.peerPool = new PeerPool({
      identity: () => ({ ...this.certificates.peer, ca: this.certificates.clusterCa.cert }),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    const joinRoutes = createJoinRoutes(
      () => this.authority,
      () => this.certificates.clusterCa.cert,
      options.logger,
    );
    const onRequest = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
      if (joinRoutes(req as IncomingMessage, res as ServerResponse)) return;
      if (this.webRoutes(req, res as ServerResponse)) return;
      res.statusCode = 404;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ error: { code: 'not_found', message: 'no such endpoint' } }));
    };
    // The secure server does its own TLS with SNICallback, so certificate reloads reach it through
    // `this.secureContext`; h2 and http/1.1 are chosen by ALPN.
    this.web = {
      // A client certificate is asked for but never required: agents renew with theirs (verified
      // against the cluster CA, which each context names, so browsers holding no certificate from
      // it are not prompted); everyone else sends none and is served as before.
      secure: createSecureServer(
        {
          allowHTTP1: true,
          requestCert: true,
          rejectUnauthorized: false,
          SNICallback: (name, cb) => cb(null, this.sniContexts.get(name.toLowerCase()) ?? this.secureContext),
        },
        onRequest,
      ),
      http1: createHttpServer(onRequest),
      h2c: createH2cServer(onRequest),
    };
    this.upgrade = new ConnectionUpgrade({ target: () => this.listeners.find((l) => l.spec.name === 'multiplex')?.mux, ...(options.logger ? { logger: options.logger } : {}) });
    this.upgrade.attach(this.web.secure);
    this.upgrade.attach(this.web.http1);
    this.metrics.setSources({
      listeners: () => [...this.listeners.map((l) => l.mux.stats()), ...[...this.retiring].map((mux) => mux.stats())],
      tunnels: () => ({ agents: this.registry.agents().length, streamsOpened: this.registry.streamStats.opened, streamsReset: this.registry.streamStats.reset }),
    });
    this.readiness.push(
      listenersReadiness(() =>
        this.closing
          ? []
          : this.listeners.map((l) => ({ name: l.spec.name, address: formatAddress({ host: l.spec.host, port: l.port }), listening: l.mux.listening })),
      ),
    );
  }

  /** Binds every listener, or none: a listener that cannot be bound closes those that were. */
  static async start(options: GateProxyOptions): Promise<GateProxy> {
    const proxy = new GateProxy(options);
    await proxy.apply(options.config);
    try {
      await proxy.joinCluster();
    } catch (err) {
      await proxy.close({ graceMs: 0 });
      throw err;
    }
    return proxy;
  }

  /** The route store this proxy shares with the others of its cluster. */
  get routeStore(): RouteStore {
    return this.store;
  }

  /** This proxy's membership: presence, its tunnels in the store, the other proxies, channel mismatches. */
  get cluster(): ClusterMember {
    return this.member;
  }

  /** Open connections allowed over every listener, and how that number came about. */
  get connectionCap(): { cap: number; from: string } {
    return { cap: this.budget?.cap ?? 0, from: this.capFrom };
  }
  private capFrom = '';

  /** Where the development CA is, when the proxy made its own certificates. */
  get caFile(): string | undefined {
    return this.certificates.caFile;
  }

  /** The configuration running now. */
  get currentConfig(): GateConfig {
    return this.config;
  }

  /** The cluster CA's certificate file (in data_dir): what agents trust and what signs their certificates. */
  get clusterCaFile(): string {
    return this.certificates.clusterCaFile;
  }

  /** The pin agents are given to check the cluster CA with: `sha256:<hex of its SubjectPublicKeyInfo>`. */
  get caPin(): string {
    return caPin(this.certificates.clusterCa.cert);
  }

  /** The file holding the development join token (mode 0600 in data_dir). */
  get devTokenFile(): string {
    return this.devTokenPath;
  }

  /** Agents' reverse tunnels: who is connected, and streams through them. */
  get tunnels(): TunnelRegistry {
    return this.registry;
  }

  /** The diagnostics listener's bound address, while `diag_addr` is set. */
  get diagAddress(): AddressInfo | undefined {
    return this.diag?.server.address;
  }

  /**
   * One more thing /readyz must find ready (e.g. `clusterReadiness(member, store)` once the proxy
   * is a cluster member).
   */
  addReadiness(source: ReadinessSource): void {
    this.readiness.push(source);
  }

  /** Sessions to other proxies of the cluster (issue 14): forwarded dials go through them. */
  get peers(): PeerPool {
    return this.peerPool;
  }

  /** The listeners with the ports they are bound to. */
  get plan(): ListenerPlan {
    return {
      mode: this.config.listenerMode,
      listeners: this.listeners.map((l) => ({ ...l.spec, port: l.port })),
    };
  }

  stats(): Record<string, StatsSnapshot> {
    return Object.fromEntries(this.listeners.map((l) => [l.spec.name, l.mux.stats()]));
  }

  /**
   * New configuration and certificates, all or nothing (issue 12): everything is built and every
   * new listener bound before anything is swapped; on any failure what was opened is closed and
   * the running configuration stays. Listeners that stay take the new routes and the new
   * timeouts, limits and PROXY-protocol settings for new connections; established connections
   * keep the routes, deadlines and trust they started with.
   */
  async reload(config: GateConfig): Promise<void> {
    const was = this.config;
    await this.apply(config);
    if (this.storeLabel(was) !== this.storeLabel(config) || was.cluster.storeCaFile !== config.cluster.storeCaFile || was.cluster.presenceTtlMs !== config.cluster.presenceTtlMs) {
      this.logger.warn({ store: this.storeLabel(was) }, 'cluster.store, store_ca_file and presence_ttl take effect at the next start; this proxy keeps the ones it started with');
    }
    await this.member.update(this.presenceFields(config));
    this.logger.info({ source: config.source }, 'configuration reloaded');
  }

  /** True from `drain()` on. */
  get isDraining(): boolean {
    return this.draining;
  }

  /**
   * The first half of a rolling restart (issue 14, item 4), before `close`: the presence is marked
   * draining in the store (other proxies try this one last), new tunnels and forwarded dials are
   * refused with GATE_ERR_DRAINING, and every agent and peer gets a GOAWAY, so agents dial a new
   * tunnel (through the load balancer, to another proxy) while open streams finish on the old one.
   * The listeners keep accepting: a client that still lands here is served through another holder.
   * Resolves once the draining presence has been announced (or the store failed to take it).
   */
  async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.registry.setDraining(true);
    this.logger.info({ proxyId: this.proxyId, agents: this.registry.agents().length }, 'draining: no new tunnels, agents told to go elsewhere, open streams finish');
    // Announced before the agents are told, so the tunnels they open next are not sent back here.
    await this.member?.setDraining(true);
    this.registry.goAway();
    this.peering.goAway();
  }

  async close(options: { graceMs?: number } = {}): Promise<void> {
    // /readyz says 503 from now on (the load balancer stops sending), while the diagnostics
    // listener stays up for the grace period so that the prober sees it.
    this.closing = true;
    const listeners = this.listeners;
    this.listeners = [];
    // Out of the cluster first: no other proxy sends this one a dial it is about to refuse.
    await this.member?.stop();
    // Agents are told first (GOAWAY): their open streams may finish within the grace period,
    // and they reconnect elsewhere or when this proxy is back instead of waiting on a dead path.
    this.registry.goAway();
    this.peering.goAway();
    await Promise.all(listeners.map((l) => this.retire(l.mux, options)));
    this.registry.close();
    this.upgrade.close();
    this.peering.close();
    this.peerPool.close();
    this.dialer?.close();
    const diag = this.diag;
    this.diag = undefined;
    await diag?.server.close();
    if (this.ownsStore) await this.store.close();
  }

  /** A stream through `agent`'s tunnel: this proxy's, else another holder's (issue 14). */
  private openTunnel(agent: string, target: string, options: OpenStreamOptions): Promise<ClientHttp2Stream> {
    return this.dialer ? this.dialer.open(agent, target, options) : this.registry.open(agent, target, options);
  }

  /** Opens the route store (unless one was given) and starts announcing this proxy in it. */
  private async joinCluster(): Promise<void> {
    if (this.options.routeStore) {
      this.store = this.options.routeStore;
    } else {
      this.store = await routeStoreFor(this.config.cluster, this.options.logger);
      this.ownsStore = true;
    }
    this.member = new ClusterMember({
      store: this.store,
      registry: this.registry,
      presence: { id: this.proxyId, version: this.options.version, ...this.presenceFields(this.config) },
      ttlMs: this.config.cluster.presenceTtlMs,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    // /readyz: registered in the store within its TTL and not draining; the metrics count what
    // the member runs into.
    this.addReadiness(clusterReadiness(this.member, this.storeLabel(this.config)));
    this.member.on('store-error', (_error: unknown, operation: string) => this.metrics.storeError(operation));
    this.member.on('proxies-changed', () => this.metrics.channelMismatch(this.member.channelMismatches().length));
    // What agents are told (issue 14): this proxy's id from the first tunnel on, and the live
    // proxies whenever the store says they changed, so an agent behind the load balancer keeps its
    // tunnels on distinct proxies. Draining proxies refuse new tunnels: an agent must not count on them.
    this.registry.setClusterView({ proxyId: this.proxyId, proxyIds: [this.proxyId] });
    this.member.on('proxies-changed', (proxies: ProxyPresence[]) => {
      this.registry.setClusterView({ proxyId: this.proxyId, proxyIds: proxies.filter((p) => !p.draining).map((p) => p.id) });
    });
    this.dialer = new ClusterDialer({
      registry: this.registry,
      store: this.store,
      member: this.member,
      peers: this.peerPool,
      onPeerDial: (outcome, code) => this.metrics.peerDial(outcome, code),
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    // A proxy that left the store (stopped, or its presence expired) is dialled no more: its session goes.
    this.member.on('proxies-changed', (proxies: Array<{ id: string }>) => this.peerPool.retain(proxies.map((p) => p.id)));
    await this.member.start();
    this.logger.info({ proxyId: this.proxyId, store: this.storeLabel(this.config), peerAddr: this.presenceFields(this.config).peerAddr }, 'joined the cluster');
  }

  /** The presence fields a configuration decides (a reload may change them). */
  private presenceFields(config: GateConfig): { peerAddr: string; channelFingerprint: string } {
    return { peerAddr: this.peerAddress(config), channelFingerprint: channelFingerprint(config.proxy.automaticUpgradesChannels) };
  }

  /**
   * What other proxies dial for peering: `peer_public_addr`, else the peer listener's bound address
   * (a wildcard host, which only means "every interface" to a listener, replaced by this machine's
   * host name); empty when this proxy has no peer listener.
   */
  private peerAddress(config: GateConfig): string {
    if (config.proxy.peerPublicAddr) return formatAddress(config.proxy.peerPublicAddr);
    const peer = this.listeners.find((l) => l.spec.name === 'peer');
    if (!peer) return '';
    return formatAddress({ host: isWildcardHost(peer.spec.host) ? hostname() : peer.spec.host, port: peer.port });
  }

  private storeLabel(config: GateConfig): string {
    return config.cluster.store.kind === 'memory' ? 'memory' : config.cluster.store.label;
  }

  /** Closes a listener's multiplexer, counting it in the metrics until it is gone and its totals after. */
  private async retire(mux: Multiplexer, options: { graceMs?: number }): Promise<void> {
    this.retiring.add(mux);
    try {
      await mux.close(options);
    } finally {
      this.retiring.delete(mux);
      this.metrics.retire(mux.stats());
    }
  }

  /** The diagnostics listener `config` asks for: the running one when its address is unchanged, a new one bound, or none. */
  private async diagFor(config: GateConfig): Promise<{ server: DiagServer; spec: HostPort } | undefined> {
    const spec = config.diagAddr;
    if (!spec) return undefined;
    const running = this.diag;
    if (running && running.spec.host === spec.host && running.spec.port === spec.port) return running;
    const server = await DiagServer.start({
      host: spec.host,
      port: spec.port,
      metrics: this.metrics,
      readiness: () => this.readiness,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    return { server, spec };
  }

  private async apply(config: GateConfig): Promise<void> {
    // Everything that can fail (files, certificates, route tables, listening sockets) is done
    // before anything is swapped, so a bad reload leaves the running proxy as it was.
    const dataDir = config.dataDir ?? '.data';
    const certificates = await loadProxyCertificates(config, dataDir);
    const devToken = await loadDevToken(dataDir);
    // Each context names the cluster CA: it verifies the client certificates agents renew with.
    const clientCa = certificates.clusterCa.cert;
    const secureContext = createSecureContext({ ...certificates.default, ca: clientCa });
    const sniContexts = new Map(Object.entries(certificates.bySni).map(([name, pair]) => [name, createSecureContext({ ...pair, ca: clientCa })]));
    const channels = new VersionChannels({
      channels: config.proxy.automaticUpgradesChannels,
      proxyVersion: this.options.version,
      fetchText: this.options.fetchText ?? defaultFetch,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    const plan = planListeners(config);
    const routeOptions = {
      tunnels: this.registry,
      peering: this.peering,
      openTunnel: (agent: string, target: string, o: OpenStreamOptions) => this.openTunnel(agent, target, o),
      ...(this.options.env ? { env: this.options.env } : {}),
    };
    const routesOf = (spec: ListenerSpec) => spec.routes.map((r) => routeFor(r, certificates, this.web, routeOptions));
    const next = plan.listeners.map((spec) => ({ spec, routes: routesOf(spec) }));
    const budgetSettings = this.budgetSettings(config);
    const budget = this.budget ?? new ConnectionBudget(budgetSettings.options);

    const running = new Set(this.listeners);
    const kept: Array<{ existing: RunningListener; spec: ListenerSpec; routes: Route[] }> = [];
    const opened: RunningListener[] = [];
    // First, so that at start a prober finds /readyz saying 503 while the listeners are bound.
    const diag = await this.diagFor(config);
    try {
      for (const { spec, routes } of next) {
        const existing = [...running].find((l) => serves(l, spec));
        if (existing) {
          new RouteTable(routes); // throws GATE_ERR_CONFIG_INVALID now rather than half-way through the swap
          running.delete(existing);
          kept.push({ existing, spec, routes });
          continue;
        }
        opened.push(await this.open(spec, routes, muxSettings(config, budget, spec)));
      }
    } catch (err) {
      await Promise.all(opened.map((l) => l.mux.close({ graceMs: 0 })));
      if (diag && diag !== this.diag) await diag.server.close();
      throw err;
    }

    // The swap: nothing below can fail.
    this.config = config;
    this.certificates = certificates;
    this.secureContext = secureContext;
    this.sniContexts = sniContexts;
    this.revoked = new Set(config.agents.revokedSerials);
    // A certificate revoked by this reload ends its agent's tunnel now, not at its next connect.
    this.registry.revalidate();
    this.joinTokens.replace([...config.agents.joinTokens, devToken]);
    this.devTokenPath = join(dataDir, DEV_TOKEN_FILE);
    this.authority = new AgentAuthority({
      ca: certificates.clusterCa,
      tokens: this.joinTokens,
      certificateTtlMs: () => this.config.agents.certificateTtlMs,
      isRevoked: (serial) => this.revoked.has(serial),
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    // The default context, for clients that send no SNI (curl to an IP address).
    (this.web.secure as TlsServer).setSecureContext({ ...certificates.default, ca: clientCa });
    this.channels = channels;
    this.upgrade.setOptions({ trustedNetworks: config.proxy.connectionUpgradeTrustedNetworks, pingIntervalMs: config.proxy.connectionUpgradePingIntervalMs });
    this.webRoutes = createWebRoutes({
      ping: () => buildPing(this.config, this.plan, this.options.version),
      channels: this.channels,
      maintenance: () => this.config.proxy.clusterMaintenanceConfig,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    budget.setOptions(budgetSettings.options);
    if (this.budget === undefined || this.capFrom !== budgetSettings.from || this.budget.cap !== budgetSettings.options.cap) {
      // The cap always exists (issue 16): say at start, and when it changes, what it is and why.
      this.logger.info({ maxConnections: budget.cap, capFrom: budgetSettings.from, highWater: budget.highWater, sourceShare: budget.sourceShare }, `connection cap ${budget.cap} (${budgetSettings.from})`);
    }
    this.budget = budget;
    this.capFrom = budgetSettings.from;
    for (const { existing, spec, routes } of kept) {
      existing.mux.setRoutes(routes);
      existing.mux.setOptions(muxSettings(config, budget, spec));
      existing.spec = spec;
    }
    // Listeners the new configuration no longer has: stop accepting, let their connections finish.
    for (const gone of running) void this.retire(gone.mux, { graceMs: 30_000 });
    if (this.diag && this.diag !== diag) void this.diag.server.close();
    this.diag = diag;
    // In the plan's order (the shared port first), as the ping and `plan` report them.
    const order = new Map(next.map(({ spec }, i) => [spec, i]));
    this.listeners = [...kept.map((k) => k.existing), ...opened].sort((a, b) => order.get(a.spec)! - order.get(b.spec)!);
  }

  /** A new listener's multiplexer, bound; GATE_ERR_LISTEN_FAILED when its address cannot be. */
  private async open(spec: ListenerSpec, routes: Route[], settings: MultiplexerSettings): Promise<RunningListener> {
    const mux = new Multiplexer({
      routes,
      ...settings,
      ...(this.options.logger ? { logger: this.options.logger.child({ listener: spec.name }) } : {}),
    });
    try {
      const address = await mux.listen({
        host: spec.host,
        port: spec.port,
        ...(spec.silentRoute !== undefined ? { silentRoute: spec.silentRoute } : {}),
        ...(spec.silentAfterMs !== undefined ? { silentAfterMs: spec.silentAfterMs } : {}),
      });
      return { spec, mux, port: address.port };
    } catch (err) {
      await mux.close({ graceMs: 0 });
      if (err instanceof GateError) throw err;
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new GateError(ErrorCodes.LISTEN_FAILED, `${spec.configKey}: cannot listen on ${spec.host}:${spec.port} (${code})`, { cause: err });
    }
  }

  /** The cap: max_connections when set, else what the open-file limit carries. */
  private budgetSettings(config: GateConfig): { options: { cap: number; highWater: number; sourceShare: number }; from: string } {
    const p = config.proxy;
    const descriptors = processBudget().from; // read once per process
    if (p.maxConnections > descriptors.cap) {
      this.logger.warn(
        { maxConnections: p.maxConnections, descriptorCap: descriptors.cap },
        `max_connections ${p.maxConnections} is above what the open-file limit carries (${descriptors.cap}: ${describeCap(descriptors)}); connections past it may fail to dial their upstream: raise LimitNOFILE`,
      );
    }
    const cap = p.maxConnections > 0 ? p.maxConnections : descriptors.cap;
    const from = p.maxConnections > 0 ? 'proxy_service.max_connections' : describeCap(descriptors);
    return { options: { cap, highWater: p.highWater, sourceShare: p.sourceShare }, from };
  }
}
