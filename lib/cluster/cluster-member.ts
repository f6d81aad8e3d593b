import { EventEmitter } from 'node:events';
import { ErrorCodes, GateError, isGateError } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { DescribedAgent } from '../tunnel/registry.js';
import { recordFor } from './inventory.js';
import type { InventoryRecord, ProxyPresence, RouteStore, TunnelHolding } from './route-store.js';

/**
 * What a ClusterMember needs of the TunnelRegistry: its `agent-connected` (name) and
 * `agent-disconnected` (name, reason) events, who is connected, and (for the inventory) what a
 * connected agent said about itself.
 */
export type TunnelEvents = Pick<EventEmitter, 'on' | 'off'> & {
  agents(): string[];
  describedAgent?(name: string): DescribedAgent | undefined;
};

export interface ClusterMemberOptions {
  store: RouteStore;
  registry: TunnelEvents;
  presence: Omit<ProxyPresence, 'draining'>;
  /** Lifetime of every record this member writes; it refreshes them every third of it. */
  ttlMs: number;
  logger?: Logger;
  /** The clock `registered` is judged by (tests); default Date.now. */
  now?: () => number;
}

/** The RouteStore method a `store-error` came from (a metric label). */
export type StoreOperation = 'announce' | 'holdTunnel' | 'proxies' | 'dropTunnel' | 'withdraw' | 'putAgentRecord' | 'dropAgentRecord';

/** Another proxy whose channel configuration differs from ours. */
export interface ChannelMismatch {
  proxyId: string;
  theirs: string;
  ours: string;
}

/**
 * This proxy as a member of the cluster: it announces its presence every third of the TTL, records
 * the tunnels its agents hold (one generation per agent and connection, so the late delete of a
 * replaced tunnel cannot remove the one that replaced it), and reads the other proxies back.
 *
 * Every refresh re-asserts everything this proxy holds, not only what changed: after the store lost
 * its data (Redis restarted, or unreachable for longer than the TTL) every proxy has registered its
 * presence and tunnels again one tick after the store is back, without a restart.
 * While the store is down local tunnels keep working: nothing here is on a connection's path.
 *
 * Events: `proxies-changed` (ProxyPresence[], this proxy included), `store-error` (GateError and
 * the StoreOperation, each failed operation, for counting; the log has one line per outage), `store-recovered`,
 * `channel-mismatch` (ChannelMismatch, once per distinct one).
 */
export class ClusterMember extends EventEmitter implements Closable {
  readonly proxyId: string;
  private readonly log: Logger;
  private readonly now: () => number;
  private presence: Omit<ProxyPresence, 'draining'>;
  private draining = false;
  /** agent → generation of the tunnel this proxy holds now. */
  private readonly held = new Map<string, number>();
  /** agent → last generation handed out (kept after a disconnect, so generations only grow). */
  private readonly issued = new Map<string, number>();
  /** agent → the inventory record this proxy wrote for it (what a drop must name). */
  private readonly records = new Map<string, InventoryRecord>();
  private lastAnnouncedAt: number | undefined;
  private lastProxies: ProxyPresence[] = [];
  private lastProxiesKey = '';
  private failing = false;
  private readonly mismatches = new Map<string, ChannelMismatch>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private again = false;
  private started = false;
  private readonly lifecycle = new Lifecycle();

  private readonly onConnected = (agent: string): void => {
    const generation = (this.issued.get(agent) ?? 0) + 1;
    this.issued.set(agent, generation);
    this.held.set(agent, generation);
    this.write('holdTunnel', this.options.store.holdTunnel(this.holding(agent, generation), this.options.ttlMs));
    const record = this.recordOf(agent, generation);
    if (record) this.write('putAgentRecord', this.options.store.putAgentRecord(record, this.options.ttlMs));
  };

  private readonly onDisconnected = (agent: string): void => {
    const generation = this.held.get(agent);
    if (generation === undefined) return;
    this.held.delete(agent);
    this.write('dropTunnel', this.options.store.dropTunnel(this.holding(agent, generation)));
    const record = this.records.get(agent);
    this.records.delete(agent);
    if (record) this.write('dropAgentRecord', this.options.store.dropAgentRecord(record));
  };

  constructor(private readonly options: ClusterMemberOptions) {
    super();
    if (!(options.ttlMs > 0))
      throw new GateError(ErrorCodes.INVALID_ARGUMENT, `ClusterMember: ttlMs must be above 0, got ${options.ttlMs}`);
    this.proxyId = options.presence.id;
    this.presence = { ...options.presence };
    this.log = componentLogger(options.logger, 'cluster');
    this.now = options.now ?? Date.now;
  }

  /**
   * Records the agents connected now, announces this proxy and starts the refresh timer. Resolves
   * after the first refresh whatever its outcome: a proxy starts (and serves its local tunnels)
   * while the store is down, and registers by itself once it is back.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.options.registry.on('agent-connected', this.onConnected);
    this.options.registry.on('agent-disconnected', this.onDisconnected);
    for (const agent of this.options.registry.agents()) this.onConnected(agent);
    this.timer = setInterval(() => void this.refresh(), Math.max(1, Math.floor(this.options.ttlMs / 3)));
    this.timer.unref();
    await this.refresh();
  }

  /** Whether the last announce got through within the TTL, i.e. the other proxies see this one now. */
  get registered(): boolean {
    return this.lastAnnouncedAt !== undefined && !this.stopped && this.now() - this.lastAnnouncedAt < this.options.ttlMs;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** The generation of `agent`'s tunnel this proxy holds, or undefined when it holds none. */
  generationOf(agent: string): number | undefined {
    return this.held.get(agent);
  }

  /**
   * The other live proxies as of the last successful refresh (kept while the store is unreachable),
   * draining ones included: their `draining` says so.
   */
  peers(): ProxyPresence[] {
    return this.lastProxies.filter((p) => p.id !== this.proxyId).map((p) => ({ ...p }));
  }

  /** Every live proxy (this one included), as of the last refresh. */
  proxies(): ProxyPresence[] {
    return this.lastProxies.map((p) => ({ ...p }));
  }

  /** Proxies whose channel fingerprint differs from ours, as of the last refresh. */
  channelMismatches(): ChannelMismatch[] {
    return [...this.mismatches.values()].map((m) => ({ ...m }));
  }

  /** Marks this proxy draining (or not) and announces it at once; resolves after that announce. */
  async setDraining(on: boolean): Promise<void> {
    this.draining = on;
    if (this.started && !this.stopped) await this.refresh();
  }

  /** New presence fields (a reload changed the channels or the peer address); announced at once. */
  async update(presence: Partial<Omit<ProxyPresence, 'id' | 'draining'>>): Promise<void> {
    this.presence = { ...this.presence, ...presence };
    if (this.started && !this.stopped) await this.refresh();
  }

  /** open, closing (withdrawing from the store), closed. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /**
   * Stops refreshing and withdraws this proxy's presence, which takes it out of every dial at once
   * (`holders` filters by presence); its tunnel records are dropped too, best effort. Never throws:
   * a store that is down at shutdown leaves the records to their TTL. The withdrawal is bounded by
   * the store's own timeouts, so `graceMs` is not needed here. A second call returns the same promise.
   */
  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      this.detach();
      if (!this.started) return;
      await this.inFlight;
      const store = this.options.store;
      try {
        await store.withdraw(this.proxyId);
        await Promise.all([...this.held].map(([agent, generation]) => store.dropTunnel(this.holding(agent, generation))));
        await Promise.all([...this.records.values()].map((record) => store.dropAgentRecord(record)));
      } catch (err) {
        this.log.warn({ err, code: codeOf(err) }, 'could not withdraw from the route store; the records expire with their TTL');
        this.emit(
          'store-error',
          isGateError(err) ? err : new GateError(ErrorCodes.STORE_UNAVAILABLE, `route store: ${(err as Error)?.message}`, { cause: err }),
          'withdraw',
        );
      }
      this.held.clear();
      this.records.clear();
    });
  }

  /** Stops refreshing now without withdrawing: the store's records expire with their TTL. */
  destroy(_err?: GateError): void {
    if (this.lifecycle.destroy()) this.detach();
  }

  private detach(): void {
    if (this.timer) clearInterval(this.timer);
    this.options.registry.off('agent-connected', this.onConnected);
    this.options.registry.off('agent-disconnected', this.onDisconnected);
  }

  /** Whether close() or destroy() was called: no more refreshes. */
  private get stopped(): boolean {
    return this.lifecycle.ending;
  }

  /**
   * One refresh: announce, re-assert every holding, read the proxies back. Refreshes never overlap:
   * one asked for while another runs is run once after it (with the state of that moment). The
   * timer calls it every third of the TTL; a caller that must know the store holds this proxy's
   * records now (after an outage, say: records may have expired meanwhile) awaits one.
   */
  refresh(): Promise<void> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    const run = async (): Promise<void> => {
      do {
        this.again = false;
        await this.refreshOnce();
      } while (this.again && !this.stopped);
    };
    this.inFlight = run().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async refreshOnce(): Promise<void> {
    if (this.stopped) return;
    const store = this.options.store;
    const ttlMs = this.options.ttlMs;
    const startedAt = this.now();
    let operation: StoreOperation = 'announce';
    try {
      await store.announce({ ...this.presence, draining: this.draining }, ttlMs);
      operation = 'holdTunnel';
      await Promise.all([...this.held].map(([agent, generation]) => store.holdTunnel(this.holding(agent, generation), ttlMs)));
      // Descriptions are written here and at admission only: an agent that sends changes in a
      // flood costs the store one write per refresh, not one per line.
      operation = 'putAgentRecord';
      await Promise.all(
        [...this.held].map(([agent, generation]) => {
          const record = this.recordOf(agent, generation);
          return record ? store.putAgentRecord(record, ttlMs) : undefined;
        }),
      );
      operation = 'proxies';
      const proxies = await store.proxies();
      // Judged from when the announce was sent: that is when its TTL started.
      this.lastAnnouncedAt = startedAt;
      this.recovered();
      this.observe(proxies);
    } catch (err) {
      this.failed(operation, err);
    }
  }

  private observe(proxies: ProxyPresence[]): void {
    const sorted = [...proxies].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.lastProxies = sorted;
    // Mismatches first, so that a `proxies-changed` listener reads the ones this list brings.
    this.compareChannels(sorted);
    const key = JSON.stringify(sorted.map((p) => [p.id, p.peerAddr, p.draining, p.version, p.channelFingerprint]));
    if (key !== this.lastProxiesKey) {
      this.lastProxiesKey = key;
      this.emit('proxies-changed', this.proxies());
    }
  }

  private compareChannels(proxies: ProxyPresence[]): void {
    const ours = this.presence.channelFingerprint;
    const seen = new Set<string>();
    for (const other of proxies) {
      if (other.id === this.proxyId || other.channelFingerprint === ours) continue;
      seen.add(other.id);
      const known = this.mismatches.get(other.id);
      if (known && known.theirs === other.channelFingerprint && known.ours === ours) continue;
      const mismatch: ChannelMismatch = { proxyId: other.id, theirs: other.channelFingerprint, ours };
      this.mismatches.set(other.id, mismatch);
      // One line per distinct mismatch, not per refresh: the operator needs to see it, not drown in it.
      this.log.error(
        { proxyId: this.proxyId, otherProxyId: other.id, ours, theirs: other.channelFingerprint },
        `proxy ${other.id} serves different automatic_upgrades_channels (${other.channelFingerprint}) than this proxy ${this.proxyId} (${ours}): agents behind the load balancer would flip between versions`,
      );
      this.emit('channel-mismatch', { ...mismatch });
    }
    for (const id of this.mismatches.keys()) if (!seen.has(id)) this.mismatches.delete(id);
  }

  /** A hold or drop outside a refresh: a failure counts as a store error; the next refresh repairs it. */
  private write(operation: StoreOperation, pending: Promise<unknown>): void {
    pending.catch((err: unknown) => this.failed(operation, err));
  }

  private failed(operation: StoreOperation, err: unknown): void {
    const error = isGateError(err)
      ? err
      : new GateError(ErrorCodes.STORE_UNAVAILABLE, `route store: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    const first = !this.failing;
    this.failing = true;
    this.emit('store-error', error, operation);
    if (!first) return;
    this.log.warn(
      { code: error.code, err: error },
      `route store unavailable: ${error.message}; local tunnels keep working, records are re-registered when it is back`,
    );
  }

  private recovered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info({ proxyId: this.proxyId, tunnels: this.held.size }, 'route store reachable again: presence and tunnels re-registered');
    this.emit('store-recovered');
  }

  /** The inventory record of a connected agent, remembered for its drop; undefined when the registry describes none. */
  private recordOf(agent: string, generation: number): InventoryRecord | undefined {
    const described = this.options.registry.describedAgent?.(agent);
    if (!described) return undefined;
    const record = recordFor(described, this.proxyId, generation);
    const was = this.records.get(agent);
    // A reconnect with another server ID (a new state directory): its old row goes.
    if (was && was.serverId !== record.serverId) this.write('dropAgentRecord', this.options.store.dropAgentRecord(was));
    this.records.set(agent, record);
    return record;
  }

  private holding(agent: string, generation: number): TunnelHolding {
    return { agent, proxyId: this.proxyId, generation };
  }
}

function codeOf(err: unknown): string | undefined {
  return isGateError(err) ? err.code : undefined;
}
