import { readFile } from 'node:fs/promises';
import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import type { ClusterConfig } from '../config/types.js';
import { MemoryRouteStore } from './memory-route-store.js';
import { RedisRouteStore } from './redis-route-store.js';
import type { RouteStore } from './route-store.js';

/**
 * The route store `cluster.store` names: this process's memory (the default), or a shared Redis.
 * A Redis that is down at start is not fatal: the proxy serves its local tunnels and registers once
 * Redis answers. An unreadable `store_ca_file` is (GATE_ERR_CONFIG_INVALID): it will not fix itself.
 */
export async function routeStoreFor(cluster: ClusterConfig, logger?: Logger): Promise<RouteStore> {
  const store = cluster.store;
  if (store.kind === 'memory') return new MemoryRouteStore();
  let ca: Buffer | undefined;
  if (cluster.storeCaFile !== undefined) {
    try {
      ca = await readFile(cluster.storeCaFile);
    } catch (err) {
      throw new GateError(
        ErrorCodes.CONFIG_INVALID,
        `cluster.store_ca_file: cannot read ${cluster.storeCaFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
        { cause: err },
      );
    }
  }
  const redis = new RedisRouteStore({
    host: store.host,
    port: store.port,
    tls: store.tls,
    db: store.db,
    label: store.label,
    ...(ca ? { ca } : {}),
    ...(store.username !== undefined ? { username: store.username } : {}),
    ...(store.password !== undefined ? { password: store.password } : {}),
    ...(logger ? { logger } : {}),
  });
  if (!(await redis.ready())) {
    componentLogger(logger, 'route-store').warn(
      { code: ErrorCodes.STORE_UNAVAILABLE, store: store.label },
      `route store ${store.label} not reachable at start; serving local tunnels, registering once it answers`,
    );
  }
  return redis;
}
