import { saveServerCertificate } from './certificates.js';
import { RefusedAgents } from './refused-agents.js';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { GateError } from '../errors.js';
import { type Closable, type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { LogLimiter } from '../log-limiter.js';
import type { StatsSnapshot } from '../mux/stats.js';
import { fetchText as fetchThroughEnvironment } from '../client/fetch-text.js';
import type { GateConfig } from '../config/types.js';
import { caPin } from '../pki/ca-pin.js';
import { JoinTokens } from '../tunnel/join-tokens.js';
import { TunnelRegistry } from '../tunnel/registry.js';
import type { GateMetrics } from '../cluster/metrics.js';
import { listenersReadiness } from '../cluster/readiness.js';
import type { RouteStore } from '../cluster/route-store.js';
import { readInventory } from '../cluster/inventory.js';
import { isResourceStore, type ResourceStore } from '../cluster/resource-store.js';
import { MaintenanceWatch } from '../admin/maintenance-watch.js';
import { RolloutWatch } from '../admin/rollout-watch.js';
import type { FetchText } from '../web/version-channels.js';
import { DEFAULT_REQUEST_DEADLINES, type RequestDeadlines } from '../web/request-deadlines.js';
import { ClusterWiring, presenceFor } from './cluster-wiring.js';
import { ProxyDiagnostics } from './diagnostics.js';
import type { ListenerPlan, ListenerSpec } from './listener-plan.js';
import { ListenerSet } from './listener-set.js';
import { ProxyEndpoints } from './proxy-endpoints.js';
import { registerProxyParts } from './proxy-parts.js';
import { loadProxyState, type ProxyState } from './proxy-state.js';
import { routeFor } from './route-handlers.js';
import { WebFrontDoor } from './web-front-door.js';

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

const defaultFetch: FetchText = (url, { timeoutMs }) => fetchThroughEnvironment(url, { timeoutMs });

/**
 * The platform's proxy, coordinating its parts: the listeners (`ListenerSet`: the shared
 * TLS-routing port or the legacy separate ports, and the peer port), the web front door
 * (`WebFrontDoor`: ping, version channels, joining), the agents' tunnels (`TunnelRegistry`), the
 * cluster (`ClusterWiring`: store, peering, draining) and diagnostics (`ProxyDiagnostics`). A
 * configuration becomes one `ProxyState`; `reload` builds the next one and every new listener
 * before anything is swapped, so it is all or nothing and established connections keep what they
 * started with.
 */
export class GateProxy implements Closable {
  /** Random per process start: a restarted proxy is a new member, never mistaken for its predecessor. */
  readonly proxyId = randomUUID();
  private proxyState: ProxyState;
  private readonly logger: Logger;
  private readonly registry: TunnelRegistry;
  /** Agents refused for their version, so their clients are told that rather than "offline". */
  private readonly refusedAgents: RefusedAgents;
  private readonly web: WebFrontDoor;
  private readonly endpoints: ProxyEndpoints;
  private readonly listeners: ListenerSet;
  private readonly diagnostics: ProxyDiagnostics;
  private readonly clusterWiring: ClusterWiring;
  /** The maintenance window served: the cluster store's, else the configuration's. */
  private readonly maintenance: MaintenanceWatch;
  /** Managed rollouts: the find answers, and the controller while this proxy holds the lease. */
  private readonly rollout: RolloutWatch;
  /** From `close()` on /readyz reports no listener, so the load balancer stops sending at once. */
  private readonly lifecycle = new Lifecycle();

  private constructor(
    private readonly options: GateProxyOptions,
    state: ProxyState,
    private readonly joinTokens: JoinTokens,
  ) {
    const logger = options.logger ? { logger: options.logger } : {};
    this.proxyState = state;
    this.logger = componentLogger(options.logger, 'proxy');
    this.diagnostics = new ProxyDiagnostics(options.logger, () => readInventory(this.clusterWiring.store));
    this.registry = new TunnelRegistry({ ...logger, isRevoked: (serial) => this.proxyState.revoked.has(serial), version: options.version });
    this.refusedAgents = new RefusedAgents(this.registry);
    this.clusterWiring = new ClusterWiring({
      proxyId: this.proxyId,
      version: options.version,
      registry: this.registry,
      metrics: this.metrics,
      addReadiness: (source) => this.diagnostics.addReadiness(source),
      peerIdentity: () => ({ ...this.proxyState.certificates.peer, ca: this.proxyState.certificates.clusterCa.cert }),
      routeStore: options.routeStore,
      logger: options.logger,
    });
    this.listeners = new ListenerSet({
      logger: this.logger,
      muxLogger: options.logger,
      onRetired: (snapshot) => this.metrics.retire(snapshot),
    });
    this.maintenance = new MaintenanceWatch({
      store: () => this.resourceStore,
      fallback: () => this.proxyState.config.proxy.clusterMaintenanceConfig,
      logger: options.logger,
    });
    this.rollout = new RolloutWatch({
      store: () => {
        const store = this.joinedStore;
        return store && isResourceStore(store) ? (store as RouteStore & ResourceStore) : undefined;
      },
      proxyId: this.proxyId,
      logger: options.logger,
      onHalted: (groups) => this.metrics.rolloutHalted(groups),
      onHalt: (group) => this.metrics.rolloutHalt(group),
    });
    const expiries = new LogLimiter(this.logger);
    this.web = new WebFrontDoor(state.webTls, {
      handshakeTimeoutMs: options.config.proxy.detectTimeoutMs,
      deadlines: webDeadlines(options.config),
      onExpired: (err, remote) => expiries.log('info', err.code, { code: err.code, remote }, `web connection closed: ${err.message}`),
    });
    this.endpoints = new ProxyEndpoints(this.web, {
      version: options.version,
      state: () => this.proxyState,
      plan: () => this.plan,
      upgradeTarget: () => this.listeners.multiplexer('multiplex'),
      maintenance: () => this.maintenance.current(),
      find: (host, group) => this.rollout.find(host, group),
      admin: {
        store: () => {
          const store = this.joinedStore;
          return store && isResourceStore(store) ? (store as RouteStore & ResourceStore) : undefined;
        },
        ca: () => this.proxyState.certificates.clusterCa,
        identity: () => ({
          cluster: clusterName(this.proxyState.config),
          version: options.version,
          caPin: this.caPin,
          proxyId: this.proxyId,
        }),
        logger: options.logger,
      },
      logger: options.logger,
    });
    this.diagnostics.observe(this.listeners, this.registry, () => this.endpoints.upgrade.counts);
    this.diagnostics.addReadiness(listenersReadiness(() => (this.lifecycle.ending ? [] : this.listeners.readiness())));
    const diagnostics = this.diagnostics;
    const clusterWiring = this.clusterWiring;
    const maintenance = this.maintenance;
    const plan = () => this.plan;
    registerProxyParts(this, {
      rolloutWatch: this.rollout,
      get maintenanceSource() {
        return maintenance.source;
      },
      metrics: diagnostics.metrics,
      get cluster() {
        return clusterWiring.member;
      },
      get peers() {
        return clusterWiring.peers;
      },
      get plan() {
        return plan();
      },
      addReadiness: (source) => diagnostics.addReadiness(source),
    });
  }

  /** Binds every listener, or none: a listener that cannot be bound closes those that were. */
  static async start(options: GateProxyOptions): Promise<GateProxy> {
    const joinTokens = new JoinTokens();
    const state = await GateProxy.load(options, options.config, joinTokens);
    const proxy = new GateProxy(options, state, joinTokens);
    await proxy.apply(state);
    try {
      await proxy.clusterWiring.join(state.config.cluster, presenceFor(state.config, proxy.listeners.boundAddress('peer')));
      if (!isResourceStore(proxy.clusterWiring.store))
        proxy.logger.warn(
          "the route store given holds no resources: no admin endpoint, and the maintenance window is the configuration file's",
        );
      await proxy.maintenance.start();
      await proxy.rollout.start();
    } catch (err) {
      await proxy.close({ graceMs: 0 });
      throw err;
    }
    return proxy;
  }

  /** The cluster store from `join` on (undefined before). */
  private get joinedStore(): RouteStore | undefined {
    try {
      return this.clusterWiring.store;
    } catch {
      return undefined;
    }
  }

  /** The store's resources (the maintenance window, roles, users), when the store holds them. */
  private get resourceStore(): ResourceStore | undefined {
    const store = this.joinedStore;
    return store && isResourceStore(store) ? store : undefined;
  }

  private get metrics(): GateMetrics {
    return this.diagnostics.metrics;
  }

  /** The route store this proxy shares with the others of its cluster. */
  get routeStore(): RouteStore {
    return this.clusterWiring.store;
  }

  /** Agents' reverse tunnels: who is connected, and streams through them. */
  get tunnels(): TunnelRegistry {
    return this.registry;
  }

  /** Open connections allowed over every listener, and how that number came about. */
  get connectionCap(): { cap: number; from: string } {
    return this.listeners.connectionCap;
  }

  /** The configuration running now. */
  get currentConfig(): GateConfig {
    return this.proxyState.config;
  }

  /** Where the development CA is, when the proxy made its own certificates. */
  get caFile(): string | undefined {
    return this.proxyState.certificates.caFile;
  }

  /** The cluster CA's certificate file (in data_dir): what agents trust and what signs their certificates. */
  get clusterCaFile(): string {
    return this.proxyState.certificates.clusterCaFile;
  }

  /** The pin agents are given to check the cluster CA with: `sha256:<hex of its SubjectPublicKeyInfo>`. */
  get caPin(): string {
    return caPin(this.proxyState.certificates.clusterCa.cert);
  }

  /** The file holding the development join token (mode 0600 in data_dir). */
  get devTokenFile(): string | undefined {
    return this.proxyState.devTokenFile;
  }

  /** The diagnostics listener's bound address, while `diag_addr` is set. */
  get diagAddress(): AddressInfo | undefined {
    return this.diagnostics.address;
  }

  private get plan(): ListenerPlan {
    return this.listeners.plan(this.proxyState.config.listenerMode);
  }

  /** Each listener's name and the address it is bound to (the port the system chose, for port 0). */
  get listening(): Array<{ name: string; host: string; port: number }> {
    return this.plan.listeners.map(({ name, host, port }) => ({ name, host, port }));
  }

  /** True from `drain()` on. */
  get isDraining(): boolean {
    return this.clusterWiring.isDraining;
  }

  stats(): Record<string, StatsSnapshot> {
    return this.listeners.stats();
  }

  /**
   * New configuration and certificates, all or nothing: everything is built and every new
   * listener bound before anything is swapped; on any failure what was opened is closed and the
   * running configuration stays. Listeners that stay take the new routes and the new timeouts,
   * limits and PROXY-protocol settings for new connections; established connections keep the
   * routes, deadlines and trust they started with.
   */
  async reload(config: GateConfig): Promise<void> {
    const was = this.proxyState.config;
    await this.apply(await GateProxy.load(this.options, config, this.joinTokens));
    await this.clusterWiring.reloaded(was.cluster, config.cluster, presenceFor(config, this.listeners.boundAddress('peer')));
    this.logger.info({ source: config.source }, 'configuration reloaded');
  }

  /**
   * The first half of a rolling restart, before `close`: the presence is marked draining in the
   * store (other proxies try this one last), new tunnels and forwarded dials are refused with
   * GATE_ERR_DRAINING, and every agent and peer gets a GOAWAY, so agents dial a new tunnel (through
   * the load balancer, to another proxy) while open streams finish on the old one. The listeners
   * keep accepting: a client that still lands here is served through another holder. Resolves
   * once the draining presence has been announced (or the store failed to take it).
   */
  drain(): Promise<void> {
    return this.clusterWiring.drain();
  }

  /**
   * Stops: /readyz says 503 at once (the load balancer stops sending) while the diagnostics
   * listener stays up for the grace period so that the prober sees it; open connections get
   * `graceMs` to finish.
   */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      // Out of the cluster first: no other proxy sends this one a dial it is about to refuse.
      await this.clusterWiring.leave();
      // Agents and peers are told (GOAWAY): their open streams may finish within the grace period, and
      // they reconnect elsewhere or when this proxy is back instead of waiting on a dead path.
      this.clusterWiring.goAway();
      await this.listeners.close(options);
      await this.registry.close();
      await this.endpoints.close();
      await this.maintenance.close();
      await this.rollout.close();
      await this.clusterWiring.close();
      await this.diagnostics.close();
    });
  }

  /** Stops now: every listener, connection, tunnel, peering session and the diagnostics listener destroyed. */
  destroy(err?: GateError): void {
    if (!this.lifecycle.destroy()) return;
    this.listeners.destroy(err);
    this.registry.destroy(err);
    this.endpoints.destroy(err);
    this.maintenance.destroy();
    this.rollout.destroy();
    this.clusterWiring.destroy(err);
    this.diagnostics.destroy(err);
  }

  /** open, closing (connections finishing), closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  private static load(options: GateProxyOptions, config: GateConfig, joinTokens: JoinTokens): Promise<ProxyState> {
    return loadProxyState(config, {
      version: options.version,
      fetchText: options.fetchText ?? defaultFetch,
      joinTokens,
      logger: options.logger,
    });
  }

  /**
   * Makes `state` the running one. Whatever can fail (binding the diagnostics listener and every
   * new listener, checking route tables) is done first; the swap below it cannot fail.
   */
  private async apply(state: ProxyState): Promise<void> {
    const diag = await this.diagnostics.prepare(state.config.diagAddr, state.diagToken);
    let listeners;
    try {
      listeners = await this.listeners.prepare(state.config, (spec) => this.routesFor(spec, state));
    } catch (err) {
      await diag.abort();
      throw err;
    }
    this.proxyState = state;
    this.endpoints.apply(state);
    this.web.useDeadlines(webDeadlines(state.config));
    this.joinTokens.replace([...state.joinTokenRules]);
    // A certificate revoked by this reload ends its agent's tunnel now, not at its next connect.
    this.registry.revalidate();
    listeners.commit();
    diag.commit();
    // Only now, every listener bound: a start or reload that failed has written nothing.
    const save = state.certificates.serverToSave;
    if (save) {
      await saveServerCertificate(save.dataDir, save.pair).catch((err: unknown) =>
        this.logger.warn({ err: (err as Error).message, dataDir: save.dataDir }, 'could not save the server certificate in data_dir'),
      );
    }
  }

  private routesFor(spec: ListenerSpec, state: ProxyState) {
    const options = {
      tunnels: this.registry,
      peering: this.clusterWiring.peering,
      openTunnel: this.clusterWiring.openTunnel.bind(this.clusterWiring),
      explainTunnelFailure: (agent: string, error: GateError) => this.refusedAgents.explain(agent, error),
      ...(this.options.env ? { env: this.options.env } : {}),
    };
    return spec.routes.map((r) => routeFor(r, state.certificates, this.web.servers, options));
  }
}

/** The web endpoints' deadlines a configuration asks for. */
function webDeadlines(config: GateConfig): RequestDeadlines {
  return {
    ...DEFAULT_REQUEST_DEADLINES,
    headersTimeoutMs: config.proxy.webHeadersTimeoutMs,
    requestTimeoutMs: config.proxy.webRequestTimeoutMs,
  };
}

/** The name `gate-mux status` gives the cluster: the host of the first public_addr, else of web_listen_addr. */
function clusterName(config: GateConfig): string {
  return (config.proxy.publicAddrs[0] ?? config.proxy.webListenAddr).host;
}
