/**
 * What proxies of one cluster share: who is up, and which of them hold each agent's tunnels.
 *
 * Every record has a time to live that its owner refreshes, so a proxy that dies without a word
 * (kill -9, a lost host) disappears from the store by itself. A proxy whose presence has expired is
 * never a candidate for a dial, whatever its tunnel records still say: `holders` filters them.
 *
 * Two implementations: `MemoryRouteStore` (one process, the default: nothing to run) and the Redis
 * store (`cluster.store: redis://…`), which several proxy processes share.
 */

import type { AgentService, LastUpdate } from '../tunnel/agent-description.js';
import type { GateError } from '../errors.js';
import type { CloseOptions, LifecycleState } from '../lifecycle.js';

/** One proxy of the cluster as the others see it. */
export interface ProxyPresence {
  /** Unique per running proxy process; a restarted proxy announces a new one. */
  id: string;
  /** `host:port` other proxies dial for peering; empty when this proxy does not serve peering. */
  peerAddr: string;
  /** The proxy's version (for operators, and `/readyz` detail). */
  version: string;
  /** True from SIGTERM on: no new tunnels, no new forwarded dials. */
  draining: boolean;
  /** Digest of the proxy's automatic-upgrade channel configuration (lib/cluster/channel-fingerprint.ts). */
  channelFingerprint: string;
}

/** One tunnel an agent holds to one proxy. */
export interface TunnelHolding {
  agent: string;
  proxyId: string;
  /**
   * Grows with every tunnel the same agent opens to the same proxy. A delete names the generation
   * it removes, so the late delete of a replaced tunnel cannot remove the tunnel that replaced it.
   */
  generation: number;
}

/**
 * What one proxy holds of one agent for the inventory: the agent's self-description (empty
 * hostname and version, and no services, for an agent older than descriptions), keyed by server
 * ID and proxy. An agent with tunnels on two proxies has two records and is one inventory row.
 */
export interface InventoryRecord {
  serverId: string;
  hostname: string;
  services: AgentService[];
  version: string;
  upgrader: string;
  /** What its updater's latest install came to, when the agent reports one. */
  lastUpdate?: LastUpdate;
  /** Its rollout group (`default` when it names none). */
  updateGroup: string;
  /** The name its certificate carries. */
  agent: string;
  proxyId: string;
  /** The tunnel's generation (see TunnelHolding): a late drop cannot remove a newer record. */
  generation: number;
  /** Epoch milliseconds the tunnel was admitted. */
  since: number;
}

export interface RouteStore {
  /** Publishes or refreshes this proxy's presence for `ttlMs`. */
  announce(presence: ProxyPresence, ttlMs: number): Promise<void>;
  /** Removes a proxy's presence at once (a clean stop); its tunnel records expire with their TTL. */
  withdraw(proxyId: string): Promise<void>;
  /** The proxies whose presence has not expired. */
  proxies(): Promise<ProxyPresence[]>;
  /** Records, or refreshes for `ttlMs`, that `holding.proxyId` holds a tunnel of `holding.agent`. */
  holdTunnel(holding: TunnelHolding, ttlMs: number): Promise<void>;
  /** Removes the record if it still has `holding.generation`; true when it did. */
  dropTunnel(holding: TunnelHolding): Promise<boolean>;
  /** The holders of `agent`'s tunnels whose proxy presence is live (draining ones included). */
  holders(agent: string): Promise<TunnelHolding[]>;
  /** Records, or refreshes for `ttlMs`, an agent's inventory record; an older generation never overwrites a newer one. */
  putAgentRecord(record: InventoryRecord, ttlMs: number): Promise<void>;
  /** Removes the record if it still has `generation`; true when it did. */
  dropAgentRecord(key: { serverId: string; proxyId: string; generation: number }): Promise<boolean>;
  /** Every inventory record whose proxy presence is live (the whole cluster's fleet). */
  agentRecords(): Promise<InventoryRecord[]>;
  /**
   * Releases connections and timers once the commands in flight are answered (within `graceMs`
   * when given); the records are left to expire. A second call returns the same promise.
   */
  close(options?: CloseOptions): Promise<void>;
  /**
   * Drops the connection now. Optional so that a store written for an earlier version still fits;
   * both stores of this package have it.
   */
  destroy?(err?: GateError): void;
  /** open, closing, closed (optional, as `destroy`). */
  readonly state?: LifecycleState;
}
