// Clusters of proxies for the tests, two ways, sharing the cluster CA's handling and the agents'
// test settings:
// - startClusterInProcess: GateProxy instances in this process (one data_dir, so one cluster CA;
//   one route store), for the tests that look inside the proxies (registries, peer pools, views);
//   startPeeringCluster is its preset for the peering tests, roundRobinFront puts HAProxy in front.
// - startClusterProcesses: the cluster of examples/cluster/layout.ts from real `gate-mux proxy`
//   processes, redis-server and HAProxy (PROXY v2, /readyz checks), as an operator runs it;
//   startClusterAgent joins a `gate-mux agent` process to it.
import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { serialize } from 'bson';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { haproxyConfig, proxyConfig, type ClusterLayoutOptions, type ClusterPorts } from '../../examples/cluster/layout.js';
import { MemoryRouteStore } from '../../lib/cluster/memory-route-store.js';
import type { RouteStore } from '../../lib/cluster/route-store.js';
import type { Logger } from '../../lib/log.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { CertificateAuthority, type KeyPair } from '../../lib/pki/certificate-authority.js';
import { encodeProxyHeaderV2 } from '../../lib/proxy-protocol/header.js';
import { startAgent, type AgentOptions, type TunnelAgent } from '../../lib/tunnel/agent.js';
import { joinProxy } from '../../lib/tunnel/join-client.js';
import { spawnAgentProcess, type AgentProcess } from './agent-process.js';
import { freePort, freePorts, startDaemon, type Daemon, type Teardownable } from './daemon.js';
import { startEchoServer } from './echo-servers.js';
import { startGateProxy, type RunningGateProxy } from './gate-proxy.js';
import { startHaproxy } from './haproxy.js';
import { readUntil, until } from './net.js';
import { requirePeer } from './peers.js';
import { GATE_MUX, startProxyCommand } from './proxy-command.js';
import { startRedis, type RunningRedis } from './redis.js';
import { tempDir } from './temp-dir.js';

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

// ---------------------------------------------------------------- shared

/** The files a cluster's first proxy makes in its data_dir: the cluster CA. */
const CA_FILES = ['ca.pem', 'ca-key.pem'];

/** The cluster CA the first proxy made in `dataDir` (shared by every proxy of the cluster), able to issue. */
export async function clusterAuthority(dataDir: string): Promise<CertificateAuthority> {
  const [cert, key] = await Promise.all(CA_FILES.map((file) => readFile(join(dataDir, file), 'utf8')));
  return CertificateAuthority.fromPem({ cert: cert!, key: key! });
}

/** How test agents dial: `localhost` as the proxy's name, no proxy from the environment, quick redials. */
const TEST_AGENT = { serverName: 'localhost', env: {}, backoff: { initialMs: 50, maxMs: 400 } } satisfies Partial<AgentOptions>;

/** Starts an agent (stopped at teardown) and waits until it holds a tunnel. */
async function connectedAgent(t: Teardownable, options: AgentOptions, timeoutMs?: number): Promise<TunnelAgent> {
  const agent = startAgent(options);
  t.teardown(() => agent.close());
  await agent.waitConnected(timeoutMs);
  return agent;
}

// ---------------------------------------------------------------- in this process

export interface InProcessClusterOptions {
  /** Routes every proxy has (a start may add more). */
  upstreams?: Record<string, string>;
  /** `proxy_service` keys every proxy has (a start may add more), e.g. `peer_listen_addr`. */
  proxyService?: Record<string, unknown>;
  /** The route store the proxies share (default: a new MemoryRouteStore), or `'own'`: each its own, so each tells agents only itself. */
  store?: RouteStore | 'own';
}

export interface InProcessCluster {
  /** The data_dir every proxy shares (the first made the cluster CA in it). */
  readonly dataDir: string;
  /** The shared route store (undefined with `store: 'own'`). */
  readonly store: RouteStore | undefined;
  /** The proxies started so far, in order. */
  readonly proxies: RunningGateProxy[];
  /** The cluster CA (known once the first proxy started). */
  readonly ca: CertificateAuthority;
  /** Starts one more proxy of the cluster (presence_ttl 3 s) and waits until it listens. */
  start(extra?: { proxyService?: Record<string, unknown>; upstreams?: Record<string, string>; logger?: Logger }): Promise<RunningGateProxy>;
  /** A certificate of the cluster CA for agent `name` (issued once per name). */
  agentPair(name: string): KeyPair;
  /** Options for agent `name` dialing `proxy` (host:port), with its certificate. */
  agentOptions(proxy: string, name: string, extra?: Partial<AgentOptions>): AgentOptions;
  /** Starts that agent (stopped at teardown) and waits until it is connected. */
  agent(proxy: string, name: string, extra?: Partial<AgentOptions>): Promise<TunnelAgent>;
}

/**
 * GateProxy instances of one cluster in this process, started with `start()` one after the other
 * (the first makes the cluster CA in the shared data_dir, the others load it), closed at teardown.
 */
export async function startClusterInProcess(t: Teardownable, options: InProcessClusterOptions = {}): Promise<InProcessCluster> {
  const dataDir = await tempDir(t, 'cluster-data');
  const store = options.store === 'own' ? undefined : (options.store ?? new MemoryRouteStore());
  const proxies: RunningGateProxy[] = [];
  const pairs = new Map<string, KeyPair>();
  let ca: CertificateAuthority | undefined;
  const cluster: InProcessCluster = {
    dataDir,
    store,
    proxies,
    get ca() {
      if (!ca) throw new Error('start a proxy first: it makes the cluster CA');
      return ca;
    },
    start: async (extra = {}) => {
      const proxy = await startGateProxy(t, {
        mode: 'multiplex',
        dataDir,
        upstreams: { ...options.upstreams, ...extra.upstreams },
        proxyService: { ...options.proxyService, ...extra.proxyService },
        cluster: { presence_ttl: '3s' },
        ...(store ? { routeStore: store } : {}),
        ...(extra.logger ? { logger: extra.logger } : {}),
      });
      ca ??= await clusterAuthority(dataDir);
      proxies.push(proxy);
      return proxy;
    },
    agentPair: (name) => {
      let pair = pairs.get(name);
      if (!pair) pairs.set(name, (pair = cluster.ca.issue({ commonName: name, usage: 'client' })));
      return pair;
    },
    agentOptions: (proxy, name, extra = {}) => ({
      proxy,
      name,
      ...cluster.agentPair(name),
      ca: cluster.ca.cert,
      resources: [],
      ...TEST_AGENT,
      ...extra,
    }),
    agent: (proxy, name, extra = {}) => connectedAgent(t, cluster.agentOptions(proxy, name, extra), 10_000),
  };
  return cluster;
}

/** Waits until every proxy of `cluster` lists all of them (they refresh from the store every third of presence_ttl). */
export async function everyProxySeesTheCluster(cluster: InProcessCluster): Promise<void> {
  const count = cluster.proxies.length;
  await until(() => cluster.proxies.every((p) => p.proxy.tunnels.clusterView?.proxyIds.length === count), 'every proxy sees the cluster');
}

/**
 * HAProxy in TCP round robin at `127.0.0.2:port` in front of `proxies`' shared ports (the caller
 * checked the binary with requirePeer). Tunnels are long-lived: the agents' heartbeats keep them
 * from looking idle within the minute's timeouts.
 */
export async function roundRobinFront(
  t: Teardownable,
  haproxy: string,
  proxies: RunningGateProxy[],
): Promise<{ front: string; port: number }> {
  const port = await freePort('127.0.0.2');
  await startHaproxy(
    t,
    haproxy,
    [
      'listen tunnels',
      `  bind 127.0.0.2:${port}`,
      '  balance roundrobin',
      '  timeout client 1m',
      '  timeout server 1m',
      '  retries 1',
      '  option redispatch',
      ...proxies.map((p, n) => `  server s${n} 127.0.0.1:${p.port('multiplex')}`),
    ],
    { host: '127.0.0.2', port },
  );
  return { front: `127.0.0.2:${port}`, port };
}

export interface PeeringCluster {
  readonly ca: CertificateAuthority;
  /** A TCP echo server the agents serve: `mongodb` routes reach it through agent `edge`, `redis` through `ghost` (never connected). */
  echo: string;
  /** One more proxy, with its peer listener. */
  start: InProcessCluster['start'];
  /** Agent `edge` serving the echo server, with a tunnel to `proxy`, connected. */
  agent(proxy: RunningGateProxy, extra?: Partial<AgentOptions>): Promise<TunnelAgent>;
}

/** The peering tests' cluster: proxies with peer listeners on `store`, routes to agents `edge` and `ghost`. */
export async function startPeeringCluster(t: Teardownable, store: RouteStore): Promise<PeeringCluster> {
  const echo = (await startEchoServer(t)).address;
  const cluster = await startClusterInProcess(t, {
    store,
    upstreams: { mongodb: `tunnel:edge/${echo}`, redis: `tunnel:ghost/${echo}` },
    proxyService: { peer_listen_addr: '127.0.0.1:0' },
  });
  return {
    get ca() {
      return cluster.ca;
    },
    echo,
    start: cluster.start,
    agent: (proxy, extra = {}) => cluster.agent(proxy.address('multiplex'), 'edge', { resources: [echo], ...extra }),
  };
}

/** A TLS client of `proxy`'s shared port with `alpn`, optionally behind a PROXY v2 header from `source`. */
export async function clusterClient(
  proxy: RunningGateProxy,
  ca: string,
  alpn: string,
  source?: { address: string; port: number },
): Promise<TLSSocket> {
  const port = proxy.port('multiplex');
  const raw = tcpConnect({ host: '127.0.0.1', port });
  await once(raw, 'connect');
  if (source) raw.write(encodeProxyHeaderV2({ ...source, family: 'IPv4' }, { address: '127.0.0.1', port, family: 'IPv4' }));
  const socket = tlsConnect({ socket: raw, servername: 'localhost', ca, ALPNProtocols: [alpn] });
  socket.on('error', () => {});
  await once(socket, 'secureConnect');
  return socket;
}

/**
 * Sends `first` (a protocol's first message) on a client whose dial should fail and returns what
 * the proxy said before closing it: a failed route is told in the client's protocol
 * (docs/protocols.md, "When a route fails").
 */
export async function saidBeforeClose(socket: TLSSocket, first: Buffer | string): Promise<string> {
  let got = '';
  socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
  socket.write(first);
  await once(socket, 'close');
  return got;
}

/** A MongoDB driver's first message: `hello` in an OP_MSG (MongoDB Wire Protocol), request id 1. */
export function mongoHello(): Buffer {
  const body = Buffer.from(serialize({ hello: 1, $db: 'admin' }));
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + body.length, 0);
  header.writeInt32LE(1, 4);
  header.writeInt32LE(2013, 12);
  return Buffer.concat([header, body]);
}

/**
 * Joins agent `name` to a GateProxy with its development token (once) and returns the options that
 * start it on the shared port with `resources` allowed; `connect` starts one (stopped at teardown).
 */
export async function joinedAgent(
  t: Teardownable,
  gate: RunningGateProxy,
  name: string,
  resources: string[],
): Promise<{ options: AgentOptions; connect(): Promise<TunnelAgent> }> {
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const endpoint = { proxy: gate.address('multiplex'), serverName: 'localhost', env: {} };
  const identity = await joinProxy(endpoint, { token, name, caPin: gate.proxy.caPin });
  const options: AgentOptions = { proxy: endpoint.proxy, name, ...identity, resources, ...TEST_AGENT };
  return { options, connect: () => connectedAgent(t, options) };
}

// ---------------------------------------------------------------- as processes

export interface ClusterProxy {
  index: number;
  child: ChildProcess;
  output(): string;
  ports: { web: number; peer: number; diag: number };
  dataDir: string;
  configFile: string;
}

export interface RunningCluster {
  host: string;
  redis: RunningRedis;
  proxies: ClusterProxy[];
  haproxy: Daemon;
  /** The one address agents and clients use. */
  balancerPort: number;
  /** The cluster CA (the same in every proxy's data_dir) and its pin. */
  caFile: string;
  caPin: string;
  /** The development join token (copied with the CA, so every proxy accepts it). */
  token: string;
  layout: ClusterLayoutOptions;
  /** Starts proxy `index` again (after a kill) on its ports, its file written from `layout` (default: as before). */
  restartProxy(index: number, layout?: ClusterLayoutOptions): Promise<ClusterProxy>;
  /** Kills Redis (as a crash) and starts it again on the same port, empty. */
  restartRedis(): Promise<void>;
}

/** Files the first proxy makes in its data_dir that every proxy of the cluster must share: the CA and the development token. */
const SHARED_FILES = [...CA_FILES, 'join-token'];

/**
 * The cluster of `examples/cluster/layout.ts` from real processes on 127.0.0.1: redis-server,
 * `count` `gate-mux proxy` processes (the first makes the cluster CA and the development token, the
 * others get copies, as an operator provisions them), HAProxy in front with PROXY v2 and `/readyz`
 * checks. Everything is stopped at teardown. Undefined when a peer is missing.
 */
export async function startClusterProcesses(
  t: PeerTest,
  options: { count: number; upstreams: Record<string, string>; presenceTtlSeconds?: number; channelVersions?: string[] },
): Promise<RunningCluster | undefined> {
  const haproxyBinary = requirePeer(t, 'haproxy', 'haproxy');
  const redis = await startRedis(t);
  if (!haproxyBinary || !redis) return undefined;
  const host = '127.0.0.1';
  const root = await tempDir(t, 'cluster');
  const free = await freePorts(host, 1 + 3 * options.count);
  const ports: ClusterPorts = {
    balancer: free[0]!,
    redis: redis.port,
    proxies: Array.from({ length: options.count }, (_, i) => ({ web: free[1 + 3 * i]!, peer: free[2 + 3 * i]!, diag: free[3 + 3 * i]! })),
  };
  const layout: ClusterLayoutOptions = {
    host,
    ports,
    dataDirs: ports.proxies.map((_, i) => join(root, `proxy${i + 1}`)),
    upstreams: options.upstreams,
    presenceTtlSeconds: options.presenceTtlSeconds ?? 4,
    ...(options.channelVersions ? { channelVersions: options.channelVersions } : {}),
  };

  const start = async (index: number, from = layout): Promise<ClusterProxy> => {
    const configFile = join(root, `proxy${index + 1}.yaml`);
    await writeFile(configFile, proxyConfig(from, index));
    const started = await startProxyCommand(t, ['--config', configFile, '--drain-timeout', '20'], root);
    return {
      index,
      child: started.child,
      output: started.output,
      ports: ports.proxies[index]!,
      dataDir: layout.dataDirs[index]!,
      configFile,
    };
  };
  const proxies: ClusterProxy[] = [await start(0)];
  for (const dir of layout.dataDirs.slice(1)) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    for (const file of SHARED_FILES) await copyFile(join(layout.dataDirs[0]!, file), join(dir, file));
  }
  proxies.push(...(await Promise.all(layout.dataDirs.slice(1).map((_, i) => start(i + 1)))));

  const haproxyDir = await tempDir(t, 'cluster-haproxy');
  const haproxyFile = join(haproxyDir, 'haproxy.cfg');
  await writeFile(haproxyFile, haproxyConfig(layout));
  const haproxy = await startDaemon(t, { command: haproxyBinary, args: ['-db', '-f', haproxyFile], host, port: ports.balancer });
  const caFile = join(layout.dataDirs[0]!, 'ca.pem');
  return {
    host,
    redis,
    proxies,
    haproxy,
    balancerPort: ports.balancer,
    caFile,
    caPin: caPin(await readFile(caFile)),
    token: (await readFile(join(layout.dataDirs[0]!, 'join-token'), 'utf8')).trim(),
    layout,
    async restartProxy(index, from) {
      const proxy = await start(index, from);
      proxies[index] = proxy;
      return proxy;
    },
    restartRedis: async () => {
      await redis.stop();
      await redis.restart();
    },
  };
}

export type ClusterAgent = AgentProcess;

/**
 * `gate-mux agent` joined to the cluster through the balancer (the only address it is given),
 * reaching it through `httpsProxy` when set, with `env` added to its environment and `args` to
 * its command line; `script` runs another build's gate-mux.js; `token: false` starts it from its
 * state directory alone. Killed at teardown.
 */
export function startClusterAgent(
  t: Teardownable,
  cluster: RunningCluster,
  options: {
    name: string;
    stateDir: string;
    allow: string[];
    connectionCount?: number;
    httpsProxy?: string;
    logLevel?: string;
    env?: NodeJS.ProcessEnv;
    args?: string[];
    script?: string;
    token?: boolean;
    /**
     * Start it as an operator does: `gate-mux agent configure` writes its file (these resources,
     * `KIND:NAME=HOST:PORT`, and everything else above but the connection count and the log
     * flags), then `gate-mux agent --config FILE`.
     */
    configFile?: { path: string; resources: string[] };
  },
): ClusterAgent {
  const script = options.script ?? GATE_MUX;
  const identity = [
    '--proxy',
    `0.0.0.0:${cluster.balancerPort}`,
    '--server-name',
    'localhost',
    '--name',
    options.name,
    '--state-dir',
    options.stateDir,
    ...(options.token === false ? [] : ['--token', cluster.token, '--ca-pin', cluster.caPin]),
    ...options.allow.flatMap((target) => ['--allow', target]),
  ];
  const tuning = [
    ...(options.connectionCount === undefined ? [] : ['--connection-count', String(options.connectionCount)]),
    ...(options.logLevel === undefined ? [] : ['--log-level', options.logLevel, '--log-format', 'json']),
  ];
  let args: string[];
  if (options.configFile) {
    const { path, resources } = options.configFile;
    execFileSync(
      process.execPath,
      [script, 'agent', 'configure', ...identity, ...resources.flatMap((r) => ['--resource', r]), '--output', path],
      { stdio: 'pipe' },
    );
    args = ['agent', '--config', path, ...tuning, ...(options.args ?? [])];
  } else {
    args = ['agent', ...identity, ...tuning, ...(options.args ?? [])];
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    ...(options.httpsProxy ? { HTTPS_PROXY: options.httpsProxy } : {}),
    ...options.env,
  };
  return spawnAgentProcess(t, script, args, env);
}

/** Waits until the agent's output satisfies `predicate` (or it exits). */
export async function agentSaid(agent: ClusterAgent, predicate: (text: string) => boolean): Promise<void> {
  if (predicate(agent.output())) return;
  await readUntil(agent.child.stdout!, () => predicate(agent.output()) || agent.child.exitCode !== null);
  agent.child.stdout!.resume();
}
