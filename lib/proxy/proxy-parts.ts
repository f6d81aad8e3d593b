import type { MaintenanceWatch } from '../admin/maintenance-watch.js';
import type { RolloutWatch } from '../admin/rollout-watch.js';
import type { ClusterMember } from '../cluster/cluster-member.js';
import type { GateMetrics } from '../cluster/metrics.js';
import type { PeerPool } from '../cluster/peer-pool.js';
import type { ReadinessSource } from '../cluster/readiness.js';
import type { GateProxy } from './gate-proxy.js';
import type { ListenerPlan } from './listener-plan.js';

/**
 * A running proxy's inner parts, for gate-mux's own CLI and tests. They are typed with classes
 * only `gate-mux/internal` exports, so they are not members of `GateProxy` (exported from the
 * stable `gate-mux` and `gate-mux/proxy`): a stable class must not hand out a type that may
 * change in any release (issue 39; test/package/public-types.test.ts holds it).
 */
export interface ProxyParts {
  /** The agents rollout as this proxy answers it. */
  readonly rolloutWatch: RolloutWatch;
  /** Where the maintenance window served now comes from: the cluster store (with its revision), the configuration, or none. */
  readonly maintenanceSource: MaintenanceWatch['source'];
  /** Prometheus metrics, served on `diag_addr`; peering and the route store report through it too. */
  readonly metrics: GateMetrics;
  /** This proxy's membership: presence, its tunnels in the store, the other proxies, channel mismatches. */
  readonly cluster: ClusterMember;
  /** Sessions to other proxies of the cluster: forwarded dials go through them. */
  readonly peers: PeerPool;
  /** The listeners with the ports they are bound to. */
  readonly plan: ListenerPlan;
  /** One more thing /readyz must find ready. */
  addReadiness(source: ReadinessSource): void;
}

// Keyed by the proxy and held weakly: a closed proxy nobody holds takes its parts with it.
const partsOf = new WeakMap<GateProxy, ProxyParts>();

/** Called once, by GateProxy's constructor. */
export function registerProxyParts(proxy: GateProxy, parts: ProxyParts): void {
  partsOf.set(proxy, parts);
}

/** The inner parts of `proxy`. */
export function proxyParts(proxy: GateProxy): ProxyParts {
  // Every GateProxy registers in its (private) constructor, so there is always an entry.
  return partsOf.get(proxy)!;
}
