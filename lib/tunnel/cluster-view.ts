/**
 * What a proxy tells each agent tunnelled to it: its own id and the ids of every live
 * proxy of the cluster. Agents reach proxies only through a load balancer, so this is the only way
 * an agent can tell two tunnels to the same proxy from tunnels to two proxies, and how many
 * distinct proxies there are to hold tunnels to.
 */
export interface ClusterView {
  proxyId: string;
  /** Every live proxy, `proxyId` included (added when missing); sorted, without repeats. */
  proxyIds: string[];
}

/** Bounds on what an agent accepts: ids are UUIDs in practice; a cluster of thousands is not one. */
const MAX_ID_LENGTH = 128;
const MAX_PROXIES = 1024;
const ID_PATTERN = /^[A-Za-z0-9._:-]+$/;

function validId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_ID_LENGTH && ID_PATTERN.test(id);
}

/**
 * The view in its canonical form (sender included, sorted, no repeats), or undefined when an id is
 * not a short token of `[A-Za-z0-9._:-]` (it travels in a stream's OPEN and is logged) or there
 * are more than 1024 of them. Pure.
 */
export function normalizeClusterView(view: { proxyId: string; proxyIds: readonly string[] }): ClusterView | undefined {
  if (!validId(view.proxyId) || view.proxyIds.length > MAX_PROXIES) return undefined;
  const ids = new Set([view.proxyId, ...view.proxyIds]);
  for (const id of ids) if (!validId(id)) return undefined;
  if (ids.size > MAX_PROXIES) return undefined;
  return { proxyId: view.proxyId, proxyIds: [...ids].sort() };
}

/** True when two canonical views say the same thing. */
export function sameClusterView(a: ClusterView | undefined, b: ClusterView | undefined): boolean {
  if (!a || !b) return a === b;
  return a.proxyId === b.proxyId && a.proxyIds.length === b.proxyIds.length && a.proxyIds.every((id, i) => id === b.proxyIds[i]);
}
