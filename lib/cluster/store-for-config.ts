import { ErrorCodes, GateError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ClusterConfig } from '../config/types.js';
import { MemoryRouteStore } from './memory-route-store.js';
import type { RouteStore } from './route-store.js';

/** The route store `cluster.store` names: this process's memory (the default) or a shared Redis. */
export async function routeStoreFor(cluster: ClusterConfig, _logger?: Logger): Promise<RouteStore> {
  const store = cluster.store;
  if (store.kind === 'memory') return new MemoryRouteStore();
  throw new GateError(ErrorCodes.CONFIG_INVALID, `cluster.store: ${store.label}: the Redis store is not available in this build`);
}
