import { readFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { parseConfig } from '../../lib/config/load.js';
import { LISTEN_ADDR_KEYS } from '../../lib/config/listen-addresses.js';
import type { ListenerMode, UpstreamProtocol } from '../../lib/config/types.js';
import type { RouteCounters, StatsSnapshot } from '../../lib/mux/stats.js';
import { GateProxy } from '../../lib/proxy/gate-proxy.js';
import type { Logger } from '../../lib/log.js';
import type { RouteStore } from '../../lib/cluster/route-store.js';
import type { Teardownable } from './daemon.js';
import { tempDir } from './temp-dir.js';
import { proxyParts } from '../../lib/proxy/proxy-parts.js';

export const PROXY_VERSION = '1.2.3-interop';

export interface RunningGateProxy {
  proxy: GateProxy;
  mode: ListenerMode;
  /** The proxy's development CA (PEM) and its file, to verify the certificates it terminates with. */
  ca: string;
  caFile: string;
  /** The bound port of a listener: `multiplex`, or in separate mode `web`, `ssh`, `postgres`, ... */
  port(listener: string): number;
  /** `host:port` of a listener. */
  address(listener: string): string;
  stats(listener: string): StatsSnapshot;
  /** A route's counters on a listener (zeros when it was never taken). */
  route(listener: string, route: string): RouteCounters;
  /** The configuration text the proxy was started with, for failure messages. */
  yaml: string;
  /** The data directory (cluster CA, development join token). */
  dataDir: string;
}

export interface StartGateProxyOptions {
  mode: ListenerMode;
  /** Where each protocol goes, `host:port`; a protocol left out is not routed. */
  upstreams: Partial<Record<UpstreamProtocol, string>>;
  /** `detect_timeout`, e.g. `3s` (default 10s). */
  detectTimeout?: string;
  /** Extra `auth_service` keys (join_tokens, agent_certificate_ttl, revoked_agent_certificates). */
  auth?: Record<string, unknown>;
  /** Further `proxy_service` keys, as YAML values (public_addr, automatic_upgrades_channels, ...). */
  proxyService?: Record<string, unknown>;
  logger?: Logger;
  /** HTTPS_PROXY / NO_PROXY for the proxy's own dials (default: none, so the test's environment never leaks in). */
  env?: NodeJS.ProcessEnv;
  /** A `data_dir` to use (several proxies of one cluster share one, and so its CA); default a new temp directory. */
  dataDir?: string;
  /** The top-level `cluster` section, as YAML values (store, presence_ttl, ...). */
  cluster?: Record<string, unknown>;
  /** A route store shared with other proxies of the test (default: the one `cluster.store` names). */
  routeStore?: RouteStore;
  /** Further top-level keys (diag_addr, ...). */
  top?: Record<string, unknown>;
  /** The proxy's own version: ping's server_version and the `default` upgrade channel (default PROXY_VERSION). */
  version?: string;
}

/**
 * The real proxy front door (`GateProxy`) started from a generated YAML file, the way `npm start`
 * starts it: web on 127.0.0.1 and a free port, development certificates in a temp `data_dir`, and
 * in separate mode every protocol's own port also on 127.0.0.1:0 so parallel test files never
 * collide. Closed at teardown.
 */
export async function startGateProxy(t: Teardownable, options: StartGateProxyOptions): Promise<RunningGateProxy> {
  const dataDir = options.dataDir ?? (await tempDir(t, 'proxy-data'));
  const proxyService: Record<string, unknown> = {
    web_listen_addr: '127.0.0.1:0',
    public_addr: 'localhost',
    upstreams: options.upstreams,
    detect_timeout: options.detectTimeout ?? '10s',
    ...options.proxyService,
  };
  if (options.mode === 'separate') {
    // The tunnel port is always open (the proxy hosts agents), upstream or not.
    for (const protocol of [...Object.keys(options.upstreams), 'tunnel'] as UpstreamProtocol[]) {
      proxyService[LISTEN_ADDR_KEYS[protocol]] = '127.0.0.1:0';
    }
  }
  const yaml = stringify({
    version: 'v3',
    data_dir: dataDir,
    ...options.top,
    auth_service: { proxy_listener_mode: options.mode, ...options.auth },
    proxy_service: proxyService,
    ...(options.cluster ? { cluster: options.cluster } : {}),
  });
  const { config } = parseConfig(yaml, { source: `interop ${options.mode} config` });
  const proxy = await GateProxy.start({
    config,
    version: options.version ?? PROXY_VERSION,
    env: options.env ?? {},
    ...(options.routeStore ? { routeStore: options.routeStore } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  t.teardown(() => proxy.close({ graceMs: 500 }));
  const caFile = proxy.caFile;
  if (!caFile) throw new Error('the proxy made no development CA');
  const ca = await readFile(caFile, 'utf8');
  const port = (listener: string): number => {
    const found = proxyParts(proxy).plan.listeners.find((l) => l.name === listener);
    if (!found)
      throw new Error(
        `no listener ${listener} in ${proxyParts(proxy)
          .plan.listeners.map((l) => l.name)
          .join(', ')}`,
      );
    return found.port;
  };
  const stats = (listener: string): StatsSnapshot => {
    const snapshot = proxy.stats()[listener];
    if (!snapshot) throw new Error(`no stats for listener ${listener}`);
    return snapshot;
  };
  return {
    proxy,
    mode: options.mode,
    ca,
    caFile,
    port,
    address: (listener) => `127.0.0.1:${port(listener)}`,
    stats,
    route: (listener, route) => stats(listener).byRoute[route] ?? { connections: 0, open: 0, bytesIn: 0, bytesOut: 0, errors: 0 },
    yaml,
    dataDir,
  };
}
