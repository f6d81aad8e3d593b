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
  /** Releases connections and timers; the records are left to expire. */
  close(): Promise<void>;
}
