import type { TunnelStream } from '../tunnel/tunnel-stream.js';
import { ErrorCodes, GateError, isGateError, type ErrorCode } from '../errors.js';
import { type CloseOptions, Lifecycle, type LifecycleState, type Closable } from '../lifecycle.js';
import { componentLogger, type Logger } from '../log.js';
import type { OpenStreamOptions, TunnelRegistry } from '../tunnel/registry.js';
import type { PeerAddress } from './peer-pool.js';
import type { ProxyPresence, RouteStore } from './route-store.js';

/** What the dialer needs of the cluster membership (a ClusterMember): our id, and store health. */
export interface DialerMembership {
  readonly proxyId: string;
  on(event: 'store-error' | 'store-recovered', listener: () => void): unknown;
  off(event: 'store-error' | 'store-recovered', listener: () => void): unknown;
}

/** What the dialer needs of the peer pool. */
export interface PeerOpener {
  open(peer: PeerAddress, agent: string, target: string, options?: OpenStreamOptions): Promise<TunnelStream>;
}

/** The cluster a proxy has joined: the store that names the holders, the membership, the peers. */
export interface DialerCluster {
  store: Pick<RouteStore, 'holders' | 'proxies'>;
  member: DialerMembership;
  peers: PeerOpener;
}

export interface ClusterDialerOptions {
  /** This proxy's tunnels: always tried first. */
  registry: Pick<TunnelRegistry, 'has' | 'open'>;
  /** The cluster, when joined already (else `join` it later; until then only local tunnels are dialled). */
  cluster?: DialerCluster;
  /** Milliseconds the store has to name the holders before a dial gives up on it (default 1 s). */
  storeTimeoutMs?: number;
  /** Source of the holders' random order, [0, 1) (default Math.random). */
  random?: () => number;
  /** Told the outcome of every dial through another proxy (the proxy's peer-dial metrics). */
  onPeerDial?: (outcome: 'ok' | 'failed', code?: ErrorCode) => void;
  logger?: Logger;
}

/** A holder of the agent's tunnel that this proxy can dial. */
type Candidate = PeerAddress & { draining: boolean };

/**
 * Codes after which no other holder is tried: the client left, or the agent itself refused the
 * target (every tunnel of one agent carries the same policy).
 */
const FINAL_CODES: ReadonlySet<string> = new Set([ErrorCodes.DIAL_ABORTED, ErrorCodes.AGENT_TARGET_DENIED]);

/**
 * What the route store's deadline rejects with. One value for every dial: an Error made per dial
 * captured a stack trace each time, the largest part of a peered dial's route lookup in a CPU
 * profile of the connection-rate bench.
 */
const STORE_DEADLINE = Symbol('route store deadline');

/**
 * Where `tunnel:<agent>/<target>` dials go: the one place that decides between this proxy's own
 * tunnel and another proxy's. A proxy on its own (not joined to a cluster) dials its own tunnels
 * only. Joined: this proxy's own tunnel first; then the other proxies the route store says hold one of the
 * agent's tunnels, live ones only (`holders` drops a proxy whose presence expired), those not
 * draining first, each group in random order so that load spreads and no proxy is everyone's
 * first choice. A holder that cannot be reached or lost the tunnel (GATE_ERR_PEER_DIAL_FAILED, a
 * stale record answering GATE_ERR_AGENT_OFFLINE) makes the next one be tried.
 *
 * Failures: the agent held nowhere is GATE_ERR_AGENT_OFFLINE, at once, as with one proxy; the store
 * down (or slower than `storeTimeoutMs`) is GATE_ERR_STORE_UNAVAILABLE for every dial that needed
 * another proxy, while local tunnels keep working, and fails without waiting while the membership
 * reports the outage; every holder failing is the last holder's error.
 */
export class ClusterDialer implements Closable {
  private readonly log: Logger;
  private storeDown = false;
  private cluster: DialerCluster | undefined;
  private readonly lifecycle = new Lifecycle();
  private readonly onStoreError = (): void => {
    this.storeDown = true;
  };
  private readonly onStoreRecovered = (): void => {
    this.storeDown = false;
  };

  constructor(private readonly options: ClusterDialerOptions) {
    this.log = componentLogger(options.logger, 'cluster-dialer');
    if (options.cluster) this.join(options.cluster);
  }

  /** From now on, dials of agents not held here go to the cluster's other holders. Once only. */
  join(cluster: DialerCluster): void {
    if (this.cluster) throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'the dialer has joined a cluster already');
    if (this.lifecycle.ending) return;
    this.cluster = cluster;
    cluster.member.on('store-error', this.onStoreError);
    cluster.member.on('store-recovered', this.onStoreRecovered);
  }

  /** open, or closed: the dialer holds no socket or timer, only its listeners on the membership. */
  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Stops following the membership's store health (nothing to drain: resolves at once). */
  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => this.detach());
  }

  /** Stops following the membership's store health. */
  destroy(_err?: GateError): void {
    if (this.lifecycle.destroy()) this.detach();
  }

  private detach(): void {
    this.cluster?.member.off('store-error', this.onStoreError);
    this.cluster?.member.off('store-recovered', this.onStoreRecovered);
  }

  /** The opener for `viaTunnel`: a stream to `target` through `agent`, wherever its tunnel is. */
  readonly open = async (agent: string, target: string, options: OpenStreamOptions = {}): Promise<TunnelStream> => {
    const { registry } = this.options;
    const { cluster } = this;
    // On its own, a proxy has only its tunnels: the registry's answer is the dial's.
    if (!cluster) return registry.open(agent, target, options);
    let failure: GateError | undefined;
    if (registry.has(agent)) {
      try {
        return await registry.open(agent, target, options);
      } catch (err) {
        // The agent reached and refusing, or the target unreachable from it, is the answer; only a
        // tunnel that went away meanwhile, or is finishing after a GOAWAY (AGENT_OFFLINE: it takes
        // no new stream), or is full (AGENT_BUSY: at the proxy's cap of streams per tunnel, issue
        // 37), sends the dial to the other holders: another of the agent's tunnels may have room.
        if (
          !isGateError(err) ||
          FINAL_CODES.has(err.code) ||
          (err.code !== ErrorCodes.AGENT_OFFLINE && err.code !== ErrorCodes.AGENT_BUSY && registry.has(agent))
        )
          throw err;
        failure = err;
      }
    }
    const candidates = await this.candidates(cluster, agent, target, failure);
    if (candidates.length === 0) {
      throw failure ?? new GateError(ErrorCodes.AGENT_OFFLINE, `agent ${agent} is offline (no proxy of the cluster holds its tunnel)`);
    }
    let offlineEverywhere = failure === undefined || failure.code === ErrorCodes.AGENT_OFFLINE;
    for (const peer of candidates) {
      const cancel = options.cancel ?? options.signal;
      if (cancel && (cancel instanceof AbortSignal ? cancel.aborted : cancel.cancelled))
        throw new GateError(ErrorCodes.DIAL_ABORTED, `agent ${agent} -> ${target}: aborted`, { cause: cancel.reason });
      try {
        const stream = await cluster.peers.open(peer, agent, target, options);
        this.options.onPeerDial?.('ok');
        return stream;
      } catch (err) {
        const error = isGateError(err)
          ? err
          : new GateError(ErrorCodes.PEER_DIAL_FAILED, `${peer.id}: ${(err as Error).message}`, { cause: err });
        this.options.onPeerDial?.('failed', error.code);
        if (FINAL_CODES.has(error.code)) throw error;
        // A holder that is gone or leaving is not the agent being offline; a stale record is.
        if (error.code !== ErrorCodes.AGENT_OFFLINE && error.code !== ErrorCodes.DRAINING) offlineEverywhere = false;
        this.log.warn(
          { agent, target, peer: peer.id, peerAddr: peer.peerAddr, code: error.code },
          `forwarded dial failed, trying the next holder: ${error.message}`,
        );
        failure = error;
      }
    }
    if (offlineEverywhere)
      throw new GateError(
        ErrorCodes.AGENT_OFFLINE,
        `agent ${agent} is offline (no proxy of the cluster could reach its tunnel: ${failure?.message ?? 'no holder'})`,
      );
    throw failure!;
  };

  /** The other live holders of `agent`'s tunnels, in the order to try them. */
  private async candidates(cluster: DialerCluster, agent: string, target: string, local: GateError | undefined): Promise<Candidate[]> {
    const unavailable = (why: string, cause?: unknown): GateError =>
      new GateError(
        ErrorCodes.STORE_UNAVAILABLE,
        `agent ${agent} -> ${target}: ${local ? `${local.message}; ` : 'not connected to this proxy; '}the route store, which names the other holders, ${why}`,
        { cause },
      );
    if (this.storeDown) throw unavailable('is unreachable (local tunnels only until it is back)');
    const timeoutMs = this.options.storeTimeoutMs ?? 1_000;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(STORE_DEADLINE), timeoutMs);
    });
    let holders: Awaited<ReturnType<RouteStore['holders']>>;
    let proxies: ProxyPresence[];
    try {
      [holders, proxies] = await Promise.race([Promise.all([cluster.store.holders(agent), cluster.store.proxies()]), deadline]);
    } catch (err) {
      throw err === STORE_DEADLINE
        ? unavailable(`did not answer within ${timeoutMs} ms`)
        : unavailable(`failed: ${(err as Error).message}`, err);
    } finally {
      clearTimeout(timer);
    }
    const self = cluster.member.proxyId;
    const presence = new Map(proxies.map((p) => [p.id, p]));
    const found: Candidate[] = [];
    for (const holding of holders) {
      const proxy = presence.get(holding.proxyId);
      if (!proxy || proxy.id === self || proxy.peerAddr === '') continue;
      found.push({ id: proxy.id, peerAddr: proxy.peerAddr, draining: proxy.draining });
    }
    const random = this.options.random ?? Math.random;
    const shuffled = (list: Candidate[]): Candidate[] => {
      // Fisher–Yates.
      for (let i = list.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [list[i], list[j]] = [list[j]!, list[i]!];
      }
      return list;
    };
    return [...shuffled(found.filter((c) => !c.draining)), ...shuffled(found.filter((c) => c.draining))];
  }
}
