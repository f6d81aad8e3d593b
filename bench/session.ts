// One bench run's shared state and the steps every workload takes: the routers to compare, the
// cores they are pinned to, the temp directory and certificate, the measurements recorded so far;
// starting the upstreams, running a load process, and measuring one peer (start it, check its
// routing, measure, stop it, record an error instead of throwing).
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeBenchCert, type BenchCert } from './certs.js';
import { benchConfig, type BenchConfig, type BenchOptions, type Workload } from './options.js';
import { allPeers, comparePeers, type Peer, type PeerContext, type RunningPeer } from './peers.js';
import type { ProcSample } from './proc.js';
import { JsonLines, spawnPinned, stopChild } from './spawn.js';

export interface CheckResult {
  ok: boolean;
  results: Array<{ sni: string; alpn: string[]; expect: string; got: string }>;
}

export interface Measurement {
  workload: Workload;
  round: number;
  peer: string;
  variant?: string;
  error?: string;
  check?: CheckResult;
  load?: Record<string, unknown>;
  cpuSeconds?: number;
  before?: ProcSample;
  after?: ProcSample;
  open?: ProcSample;
  derived: Record<string, number>;
  /** CPU µs per connection of each process of a multi-process path, by its script (rate workload). */
  cpuByProcess?: Record<string, number>;
}

export interface ParserRow {
  name: string;
  bytes: number;
  records: number;
  parsesPerSecond: number;
  detectsPerSecond: number;
  detectsTwoSegmentsPerSecond: number;
}

export interface BenchSession {
  options: BenchOptions;
  config: BenchConfig;
  /** dist/ (the built bench scripts are under dist/bench) and the repository above it. */
  distDir: string;
  repoDir: string;
  /** The run's temp directory: certificates, peer configs, logs (removed at the end unless --keep). */
  dir: string;
  cert: BenchCert;
  /** Every peer asked for (--peers), the ones that can run here, and those the client's TLS passes through (bulk, rate, idle). */
  peers: Peer[];
  runnable: Peer[];
  passthrough: Peer[];
  twoCores: boolean;
  /** taskset lists: the router on one core, clients and upstreams on the other (undefined on one core: unpinned). */
  routerCpus: string | undefined;
  clientCpus: string | undefined;
  /** Node flags for the gate-mux routers (--node-args, --profile). */
  profiling: Pick<PeerContext, 'nodeArgs'>;
  measurements: Measurement[];
  /** peer -> its first routing-check failure. */
  checks: Map<string, string>;
  parser: { runs: ParserRow[][]; error: string | undefined };
  log(message: string): void;
}

export function openSession(options: BenchOptions): BenchSession {
  const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const dir = mkdtempSync(join(tmpdir(), 'gate-mux-bench-'));
  // `--compare` builds run beside the peers named by `--peers`: they are what the run compares to.
  const compared = new Set(comparePeers(options.compare, options.refNodeArgs).map((p) => p.name));
  const peers = allPeers(options.compare, options.refNodeArgs).filter(
    (p) => !options.peers || options.peers.includes(p.name) || compared.has(p.name),
  );
  const runnable = peers.filter((p) => !p.missing);
  const twoCores = cpus().length >= 2;
  return {
    options,
    config: benchConfig(options),
    distDir,
    repoDir: resolve(distDir, '..'),
    dir,
    cert: makeBenchCert(dir),
    peers,
    runnable,
    passthrough: runnable.filter((p) => p.upstreams !== 'cleartext'),
    twoCores,
    routerCpus: twoCores ? '1' : undefined,
    clientCpus: twoCores ? '0' : undefined,
    profiling: { nodeArgs: [...options.nodeArgs, ...(options.profile ? ['--cpu-prof', '--cpu-prof-dir', options.profile] : [])] },
    measurements: [],
    checks: new Map(),
    parser: { runs: [], error: undefined },
    log: (message) => void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`),
  };
}

/** The context a peer is started in, with the session's upstream ports, router core and node flags. */
export function peerContext(s: BenchSession, up: Upstreams, extra: Partial<PeerContext> = {}): PeerContext {
  return { dir: s.dir, distDir: s.distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: s.routerCpus, ...s.profiling, ...extra };
}

export interface Upstreams {
  portA: number;
  portB: number;
  stop(): Promise<void>;
}

export async function startUpstreams(
  s: BenchSession,
  mode: string,
  env: Record<string, string> = {},
  cpus = s.clientCpus,
): Promise<Upstreams> {
  const child = spawnPinned(process.execPath, [join(s.distDir, 'bench', 'upstream.js')], {
    cpus,
    env: { MODE: mode, TLS_KEY: s.cert.key, TLS_CERT: s.cert.cert, ...env },
    log: join(s.dir, 'upstream.log'),
    stdout: 'pipe',
  });
  const ports = await new JsonLines(child).next<{ portA: number; portB: number }>(15_000);
  return { ...ports, stop: () => stopChild(child) };
}

/** Runs one load process to completion and returns its JSON answer. */
export async function runLoad<T>(
  s: BenchSession,
  mode: string,
  port: number,
  env: Record<string, string>,
  timeoutMs: number,
  cpus = s.clientCpus,
): Promise<T> {
  const child = spawnPinned(process.execPath, [join(s.distDir, 'bench', 'load.js')], {
    cpus,
    env: { LOAD_MODE: mode, PORT: String(port), HARD_TIMEOUT_MS: String(timeoutMs), ...env },
    log: join(s.dir, 'load.log'),
    stdout: 'pipe',
  });
  try {
    const result = await new JsonLines(child).next<T & { error?: string }>(timeoutMs + 5000);
    if (result.error) throw new Error(result.error);
    return result;
  } finally {
    await stopChild(child);
  }
}

function describeCheck(check: CheckResult): string {
  return check.results
    .filter((r) => r.got !== r.expect)
    .map((r) => `${r.sni}+[${r.alpn.join(',')}] went to ${r.got}, expected ${r.expect}`)
    .join('; ');
}

/** Starts `peer`, checks its routing, runs `body`, stops it; errors are recorded, not thrown. */
export async function withPeer(
  s: BenchSession,
  workload: Workload,
  round: number,
  peer: Peer,
  ctx: PeerContext,
  body: (running: RunningPeer, m: Measurement) => Promise<void>,
  variant?: string,
): Promise<void> {
  const m: Measurement = { workload, round, peer: peer.name, derived: {}, ...(variant ? { variant } : {}) };
  s.measurements.push(m);
  let running: RunningPeer | undefined;
  try {
    running = await peer.start(ctx);
    if (peer.name !== 'direct') {
      m.check = await runLoad<CheckResult>(s, 'check', running.port, {}, 30_000);
      if (!m.check.ok && !s.checks.has(peer.name)) s.checks.set(peer.name, describeCheck(m.check));
    }
    await body(running, m);
  } catch (err) {
    m.error = (err as Error).message;
    s.log(`${workload} ${peer.name}${variant ? ` ${variant}` : ''}: ${m.error}`);
  } finally {
    await running?.stop();
  }
}

/** `list` rotated left by `by`: each round starts with another peer, so none always runs first. */
export function rotate<T>(list: readonly T[], by: number): T[] {
  const k = list.length === 0 ? 0 : by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}
