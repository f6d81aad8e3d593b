import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { PROXY_IDS_HEADER, PROXY_ID_HEADER, TUNNEL_CLUSTER_VIEW_PATH } from '../wire/names.js';

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
 * not a short token of `[A-Za-z0-9._:-]` (it travels in an HTTP/2 header and is logged) or there
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

/** The request the proxy sends (header-only: the view is whole once HEADERS arrive). */
export function clusterViewRequestHeaders(view: ClusterView): OutgoingHttpHeaders {
  return {
    ':method': 'POST',
    ':path': TUNNEL_CLUSTER_VIEW_PATH,
    [PROXY_ID_HEADER]: view.proxyId,
    [PROXY_IDS_HEADER]: view.proxyIds.join(','),
  };
}

/** True when a stream the agent received is a cluster view rather than a CONNECT. */
export function isClusterViewRequest(headers: IncomingHttpHeaders): boolean {
  return headers[':method'] === 'POST' && headers[':path'] === TUNNEL_CLUSTER_VIEW_PATH;
}

/** The view a cluster-view request carries, or undefined when it is malformed. Pure. */
export function readClusterView(headers: IncomingHttpHeaders): ClusterView | undefined {
  const id = headers[PROXY_ID_HEADER];
  const ids = headers[PROXY_IDS_HEADER];
  if (typeof id !== 'string' || typeof ids !== 'string') return undefined;
  return normalizeClusterView({ proxyId: id, proxyIds: ids === '' ? [] : ids.split(',') });
}
