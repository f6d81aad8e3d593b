import type { TunnelStream } from '../tunnel/tunnel-stream.js';
import { hostname } from 'node:os';
import { ErrorCodes, GateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import { formatAddress, isWildcardHost, type HostPort } from '../config/address.js';
import type { ClusterConfig, GateConfig } from '../config/types.js';
import { channelFingerprint } from '../cluster/channel-fingerprint.js';
import { ClusterDialer } from '../cluster/cluster-dialer.js';
import { ClusterMember } from '../cluster/cluster-member.js';
import type { GateMetrics } from '../cluster/metrics.js';
import { PeerPool, type PeerIdentity } from '../cluster/peer-pool.js';
import { PeerServer } from '../cluster/peer-server.js';
import { clusterReadiness, type ReadinessSource } from '../cluster/readiness.js';
import type { ProxyPresence, RouteStore } from '../cluster/route-store.js';
import { routeStoreFor } from '../cluster/store-for-config.js';
import type { OpenStreamOptions, TunnelRegistry } from '../tunnel/registry.js';

/** What a configuration decides of this proxy's presence (a reload may change them). */
export interface PresenceFields {
  peerAddr: string;
  channelFingerprint: string;
}

export interface ClusterWiringOptions {
  /** Random per process start: a restarted proxy is a new member, never mistaken for its predecessor. */
  proxyId: string;
  version: string;
  /** This proxy's tunnels: served to peers, announced in the store, dialled first. */
  registry: TunnelRegistry;
  metrics: GateMetrics;
  /** Adds what /readyz asks of the membership once there is one (registered within its TTL, not draining). */
  addReadiness: (source: ReadinessSource) => void;
  /** This proxy's peering certificate and the cluster CA, read at each new peer session (reloads apply). */
  peerIdentity: () => PeerIdentity;
  /** A store shared with the other proxies, the caller's to close; default: the one `cluster.store` names. */
  routeStore?: RouteStore | undefined;
  logger?: Logger | undefined;
}

interface Joined {
  store: RouteStore;
  ownsStore: boolean;
  member: ClusterMember;
}

export function storeLabel(cluster: ClusterConfig): string {
  return cluster.store.kind === 'memory' ? 'memory' : cluster.store.label;
}

/**
 * The presence fields `config` decides. The peer address is what other proxies dial for peering:
 * `peer_public_addr`, else the peer listener's bound address (`boundPeer`; a wildcard host, which
 * only means "every interface" to a listener, replaced by this machine's host name); empty when
 * this proxy has no peer listener.
 */
export function presenceFor(config: GateConfig, boundPeer: HostPort | undefined): PresenceFields {
  let peerAddr = '';
  if (config.proxy.peerPublicAddr) peerAddr = formatAddress(config.proxy.peerPublicAddr);
  else if (boundPeer)
    peerAddr = formatAddress({ host: isWildcardHost(boundPeer.host) ? hostname() : boundPeer.host, port: boundPeer.port });
  return { peerAddr, channelFingerprint: channelFingerprint(config.proxy.automaticUpgradesChannels) };
}

/**
 * This proxy as one member of a cluster of proxies sharing a route store: its presence and its
 * tunnels in the store, the peer listener's server (dials other proxies forward here, served from
 * this proxy's tunnels only), the sessions to the other proxies, the dialer that tries this
 * proxy's tunnel first and then the other holders, and draining for a rolling restart.
 * The peering parts exist from construction (the peer listener's route needs them); the store and
 * membership from `join` on.
 */
export class ClusterWiring implements Closable {
  readonly peering: PeerServer;
  readonly peers: PeerPool;
  /** Where tunnel dials go: this proxy's tunnels, and from `join` on the other holders too. */
  private readonly dialer: ClusterDialer;
  private joined: Joined | undefined;
  private draining = false;
  private readonly lifecycle = new Lifecycle();
  private readonly logger: Logger;

  constructor(private readonly options: ClusterWiringOptions) {
    this.logger = componentLogger(options.logger, 'proxy');
    const logger = options.logger ? { logger: options.logger } : {};
    this.peering = new PeerServer({ registry: options.registry, isDraining: () => this.draining, ...logger });
    this.peers = new PeerPool({ identity: options.peerIdentity, ...logger });
    this.dialer = new ClusterDialer({
      registry: options.registry,
      onPeerDial: (outcome, code) => options.metrics.peerDial(outcome, code),
      ...logger,
    });
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** The route store, from `join` on. */
  get store(): RouteStore {
    return this.current().store;
  }

  /** The membership (presence, the other proxies, channel mismatches), from `join` on. */
  get member(): ClusterMember {
    return this.current().member;
  }

  /** A stream through `agent`'s tunnel: the dialer decides where (this proxy's, or another holder's once joined). */
  openTunnel(agent: string, target: string, options: OpenStreamOptions): Promise<TunnelStream> {
    return this.dialer.open(agent, target, options);
  }

  /** Opens the route store (unless one was given) and starts announcing this proxy in it. */
  async join(cluster: ClusterConfig, presence: PresenceFields): Promise<void> {
    const { registry, metrics, proxyId } = this.options;
    const logger = this.options.logger ? { logger: this.options.logger } : {};
    const store = this.options.routeStore ?? (await routeStoreFor(cluster, this.options.logger));
    const member = new ClusterMember({
      store,
      registry,
      presence: { id: proxyId, version: this.options.version, ...presence },
      ttlMs: cluster.presenceTtlMs,
      ...logger,
    });
    member.on('store-error', (_error: unknown, operation: string) => metrics.storeError(operation));
    member.on('proxies-changed', (proxies: ProxyPresence[]) => {
      metrics.channelMismatch(member.channelMismatches().length);
      // What agents are told: the live proxies, so an agent behind the load balancer keeps its
      // tunnels on distinct proxies. Draining proxies refuse new tunnels: an agent must not count on them.
      registry.setClusterView({ proxyId, proxyIds: proxies.filter((p) => !p.draining).map((p) => p.id) });
      // A proxy that left the store (stopped, or its presence expired) is dialled no more: its session goes.
      this.peers.retain(proxies.map((p) => p.id));
    });
    // This proxy's id from the first tunnel on, before the store has named any other proxy.
    registry.setClusterView({ proxyId, proxyIds: [proxyId] });
    this.dialer.join({ store, member, peers: this.peers });
    this.joined = { store, ownsStore: this.options.routeStore === undefined, member };
    this.options.addReadiness(clusterReadiness(member, storeLabel(cluster)));
    await member.start();
    this.logger.info({ proxyId, store: storeLabel(cluster), peerAddr: presence.peerAddr }, 'joined the cluster');
  }

  /**
   * Announces what a reload changed of the presence. The store itself is opened once: a reload
   * that names another one (or another CA or TTL for it) is told it takes effect at the next start.
   */
  async reloaded(was: ClusterConfig, now: ClusterConfig, presence: PresenceFields): Promise<void> {
    if (storeLabel(was) !== storeLabel(now) || was.storeCaFile !== now.storeCaFile || was.presenceTtlMs !== now.presenceTtlMs) {
      this.logger.warn(
        { store: storeLabel(was) },
        'cluster.store, store_ca_file and presence_ttl take effect at the next start; this proxy keeps the ones it started with',
      );
    }
    await this.joined?.member.update(presence);
  }

  /**
   * The first half of a rolling restart: new tunnels and forwarded dials are refused with
   * GATE_ERR_DRAINING, the presence is marked draining (other proxies try this one last), then
   * every agent and peer gets a GOAWAY. Resolves once the draining presence has been announced (or
   * the store failed to take it).
   */
  async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    this.options.registry.setDraining(true);
    this.logger.info(
      { proxyId: this.options.proxyId, agents: this.options.registry.agents().length },
      'draining: no new tunnels, agents told to go elsewhere, open streams finish',
    );
    // Announced before the agents are told, so the tunnels they open next are not sent back here.
    await this.joined?.member.setDraining(true);
    this.goAway();
  }

  /** Out of the store: no other proxy sends this one a dial it is about to refuse. */
  async leave(): Promise<void> {
    await this.joined?.member.close();
  }

  /** Tells every agent and every peer session served here to finish and go elsewhere. */
  goAway(): void {
    this.options.registry.goAway();
    this.peering.goAway();
  }

  /** open, closing, closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Ends the peering parts (peers' open streams get `graceMs`) and the dialer, and the store when
   * this proxy opened it; the membership is withdrawn first when `leave` was not called. A second
   * call returns the same promise.
   */
  close(options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      const joined = this.joined;
      await Promise.all([this.peering.close(options), this.peers.close(), joined?.member.close(), this.dialer.close()]);
      if (joined?.ownsStore) await joined.store.close(options);
    });
  }

  /** Ends the peering sessions, the membership's refreshes, the dialer and an owned store's connection now. */
  destroy(err?: GateError): void {
    if (!this.lifecycle.destroy()) return;
    this.peering.destroy(err);
    this.peers.destroy(err);
    const joined = this.joined;
    joined?.member.destroy(err);
    this.dialer.destroy(err);
    if (joined?.ownsStore) joined.store.destroy?.(err);
  }

  private current(): Joined {
    if (!this.joined)
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'the proxy has not joined its cluster yet: GateProxy.start() resolves once it has');
    return this.joined;
  }
}
