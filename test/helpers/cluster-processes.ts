import { execFileSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { spawnAgentProcess, type AgentProcess } from './agent-process.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { haproxyConfig, proxyConfig, type ClusterLayoutOptions, type ClusterPorts } from '../../examples/cluster/layout.js';
import { freePort, startDaemon, type Daemon, type Teardownable } from './daemon.js';
import { requirePeer } from './peers.js';
import { GATE_MUX, startProxyCommand } from './proxy-command.js';
import { readUntil } from './net.js';
import { startRedis, type RunningRedis } from './redis.js';
import { tempDir } from './temp-dir.js';

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

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

/** Files the first proxy makes in its data_dir that every proxy of the cluster must share. */
const SHARED_FILES = ['ca.pem', 'ca-key.pem', 'join-token'];

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
  const ports: ClusterPorts = { balancer: await freePort(host), redis: redis.port, proxies: [] };
  for (let i = 0; i < options.count; i++)
    ports.proxies.push({ web: await freePort(host), peer: await freePort(host), diag: await freePort(host) });
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
  const cluster: RunningCluster = {
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
  return cluster;
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
