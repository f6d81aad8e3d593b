/**
 * The configuration files of a local cluster: N proxies sharing a Redis route store, each with its
 * own web, peering and diagnostics ports, behind one HAProxy that adds PROXY v2 and health-checks
 * every proxy's `/readyz`. `npm run demo:cluster` writes these files and starts the processes; the
 * cluster end-to-end test starts the same layout. Pure: text in, text out.
 */

export interface ClusterPorts {
  /** The load balancer's port: the one address agents and clients are given. */
  balancer: number;
  redis: number;
  /** Per proxy: the public (web) port, the peering port and the diagnostics port. */
  proxies: Array<{ web: number; peer: number; diag: number }>;
}

export interface ClusterLayoutOptions {
  host: string;
  ports: ClusterPorts;
  /** Each proxy's data directory (the cluster CA is copied into each: every proxy signs). */
  dataDirs: string[];
  /** `protocol → upstream`, e.g. `postgres: tunnel:db-agent/127.0.0.1:5432`. */
  upstreams: Record<string, string>;
  /** Seconds a proxy's presence lives without a refresh (`cluster.presence_ttl`). */
  presenceTtlSeconds: number;
  /** Per proxy, the static version of channel `stable/cloud` (a different one makes a mismatch). */
  channelVersions?: string[];
}

/** One proxy's YAML. */
export function proxyConfig(options: ClusterLayoutOptions, index: number): string {
  const { host, ports } = options;
  const own = ports.proxies[index];
  const dataDir = options.dataDirs[index];
  if (!own || !dataDir) throw new RangeError(`no proxy ${index} in this layout`);
  const version = options.channelVersions?.[index] ?? 'v0.1.0';
  return [
    '# Written by examples/cluster/layout.ts: one proxy of a local cluster.',
    'version: v3',
    `data_dir: ${JSON.stringify(dataDir)}`,
    `diag_addr: ${host}:${own.diag}`,
    'cluster:',
    `  store: redis://${host}:${ports.redis}`,
    `  presence_ttl: ${options.presenceTtlSeconds}s`,
    'auth_service:',
    '  proxy_listener_mode: multiplex',
    'proxy_service:',
    `  web_listen_addr: ${host}:${own.web}`,
    `  peer_listen_addr: ${host}:${own.peer}`,
    `  public_addr: localhost:${ports.balancer}`,
    '  # Every connection on the public port comes through HAProxy, which says who the client is.',
    '  proxy_protocol: on',
    `  proxy_protocol_trusted_networks: [${host}/32]`,
    '  detect_timeout: 5s',
    '  upstreams:',
    ...Object.entries(options.upstreams).map(([protocol, upstream]) => `    ${protocol}: ${upstream}`),
    '  automatic_upgrades_channels:',
    '    stable/cloud:',
    `      static_version: ${version}`,
    '',
  ].join('\n');
}

/** HAProxy in TCP mode: round robin over the proxies' public ports, PROXY v2, `/readyz` checks. */
export function haproxyConfig(options: ClusterLayoutOptions): string {
  const { host, ports } = options;
  return [
    'global',
    '  log stderr format raw local0 warning',
    'defaults',
    '  mode tcp',
    '  log global',
    '  timeout connect 2s',
    '  timeout client 1h',
    '  timeout server 1h',
    'frontend gate',
    `  bind ${host}:${ports.balancer}`,
    '  default_backend proxies',
    'backend proxies',
    '  balance roundrobin',
    // A proxy that is gone (kill -9, or closed its listener at SIGTERM) refuses the connect: the
    // client is sent to another proxy instead of failing while health checks catch up.
    '  retries 3',
    '  option redispatch',
    // A proxy that is draining or lost the store answers 503 and leaves the rotation within
    // `fall` checks; connections already open are left alone.
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    '  default-server inter 500ms fall 2 rise 2',
    ...ports.proxies.map((p, i) => `  server proxy${i + 1} ${host}:${p.web} send-proxy-v2 check port ${p.diag}`),
    '',
  ].join('\n');
}
