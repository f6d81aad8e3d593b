// `npm run bench`: gate-mux side by side with the direct path, a plain Node peek+pipe router,
// HAProxy and nginx stream, on this machine, in one run. Router pinned to one core, clients and
// upstreams to the other (BENCHMARKS.md, "Method"); peers interleaved round by round; router CPU, memory and
// descriptors read from /proc. Writes bench/results/<stamp>.{json,md} and latest.{json,md}.
//
//   npm run bench                       full run (< 10 minutes)
//   npm run bench -- --quick            smoke run (< 1 minute)
//   npm run bench -- --only bulk,rate   some workloads (bulk, rate, idle, parser, workers, tunnel)
//   npm run bench -- --peers gate-mux,nginx --rounds 5
//   npm run bench -- --profile /tmp/prof  gate-mux runs with --cpu-prof (see bench/profile-summary.ts)
//   npm run bench -- --compare /tmp/before/dist/bench/router.js   A/B against a saved build (or several, comma-separated)
//   npm run bench -- --only tunnel --compare /tmp/before/dist/bench/tunnel-router.js   A/B the tunnelled path
//   npm run bench -- --compare dist/bench/router.js --ref-node-args '--max-semi-space-size=1'   A/B node flags
//   npm run bench -- --node-args '--max-semi-space-size=2'      node flags for the gate-mux routers
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeBenchCert, type BenchCert } from './certs.js';
import { allPeers, GATE_MUX_NODE_FLAGS, type Peer, type PeerContext, type RunningPeer } from './peers.js';
import { sample, sampleProcess, type ProcSample } from './proc.js';
import { JsonLines, spawnPinned, stopChild } from './spawn.js';
import { fmt, markdownTable, median, ratio } from './stats.js';
import { heapProbeFile, type HeapProbe } from './heap-probe.js';
import { chartSvg, type ChartPanel } from './charts.js';

const WORKLOADS = ['bulk', 'rate', 'idle', 'parser', 'workers', 'tunnel'] as const;
type Workload = (typeof WORKLOADS)[number];

const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = resolve(distDir, '..');

// ---------------------------------------------------------------- options

function parseArgs(argv: string[]): {
  quick: boolean;
  only: Set<Workload>;
  rounds: number | undefined;
  peers: string[] | undefined;
  keep: boolean;
  profile: string | undefined;
  compare: string[];
  nodeArgs: string[];
  refNodeArgs: string[] | undefined;
  warmup: boolean;
} {
  const nodeArgs: string[] = [];
  let quick = false;
  let compare: string[] = [];
  let refNodeArgs: string[] | undefined;
  let profile: string | undefined;
  let keep = false;
  let warmup = true;
  let only = new Set<Workload>(WORKLOADS);
  let rounds: number | undefined;
  let peers: string[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--quick') quick = true;
    else if (arg === '--keep') keep = true;
    else if (arg === '--no-warmup') warmup = false;
    else if (arg.startsWith('--only')) {
      const names = value()
        .split(',')
        .map((s) => s.trim());
      for (const n of names)
        if (!(WORKLOADS as readonly string[]).includes(n)) throw new Error(`unknown workload ${n} (${WORKLOADS.join(', ')})`);
      only = new Set(names as Workload[]);
    } else if (arg.startsWith('--rounds')) rounds = Math.max(1, Math.min(20, Number(value()) || 1));
    else if (arg.startsWith('--profile')) profile = resolve(value());
    else if (arg.startsWith('--compare'))
      compare = value()
        .split(',')
        .map((p) => resolve(p.trim()));
    else if (arg.startsWith('--ref-node-args')) refNodeArgs = value().split(' ').filter(Boolean);
    else if (arg.startsWith('--node-args')) nodeArgs.push(...value().split(' ').filter(Boolean));
    else if (arg.startsWith('--peers'))
      peers = value()
        .split(',')
        .map((s) => s.trim());
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(
        'npm run bench -- [--quick] [--only bulk,rate,idle,parser,workers,tunnel] [--peers direct,gate-mux,...] [--rounds N] [--keep] [--profile DIR] [--compare OTHER/dist/bench/router.js[,...]] [--node-args "--flag ..."] [--ref-node-args "--flag ..."] [--no-warmup]\n',
      );
      process.exit(0);
    } else throw new Error(`unknown option ${arg}`);
  }
  return { quick, only, rounds, peers, keep, profile, compare, nodeArgs, refNodeArgs, warmup };
}

const args = parseArgs(process.argv.slice(2));
const quick = args.quick;
const config = {
  rounds: args.rounds ?? (quick ? 1 : 3),
  bulkBytes: quick ? 256 * 2 ** 20 : 2 ** 30,
  rateMs: quick ? 1200 : 4000,
  /** Unmeasured connections before the measured rate round (every peer alike): steady state, not JIT warm-up. */
  rateWarmupMs: args.warmup ? (quick ? 500 : 1500) : 0,
  rateConcurrency: 64,
  idleCount: quick ? 500 : 5000,
  idleRounds: args.rounds ?? (quick ? 1 : 2),
  parserMs: quick ? 150 : 700,
  workersBulkBytes: quick ? 128 * 2 ** 20 : 512 * 2 ** 20,
  workersRateMs: quick ? 1500 : 3000,
  workersRounds: args.rounds ?? (quick ? 1 : 2),
  /** Bytes moved through the terminate routes (direct and tunnelled), to compare the tunnel's cost. */
  tunnelBytes: quick ? 128 * 2 ** 20 : 512 * 2 ** 20,
  /** New streams per round whose CONNECT -> 200 is timed, after `tunnelSetupWarmup` unmeasured. */
  tunnelSetupCount: quick ? 100 : 300,
  tunnelSetupWarmup: 30,
};
/**
 * Half-second polls for memory and descriptors to come back after the idle connections close.
 * V8 gives freed heap back in a memory-reducing GC once the process has gone quiet, 8-20 s
 * after the last connections closed (its memory reducer waits --gc-memory-reducer-start-delay-ms,
 * 8 s by default, then for the mutator to be idle), so the wait is long enough to see it; a
 * router that returns at once is done after the first poll.
 */
const RETURN_POLLS = quick ? 4 : 60;
const twoCores = cpus().length >= 2;
const ROUTER_CPUS = twoCores ? '1' : undefined;
const CLIENT_CPUS = twoCores ? '0' : undefined;

const profiling: Pick<PeerContext, 'nodeArgs'> = {
  nodeArgs: [...args.nodeArgs, ...(args.profile ? ['--cpu-prof', '--cpu-prof-dir', args.profile] : [])],
};
const dir = mkdtempSync(join(tmpdir(), 'gate-mux-bench-'));
const cert: BenchCert = makeBenchCert(dir);
const peers = allPeers(args.compare, args.refNodeArgs).filter((p) => !args.peers || args.peers.includes(p.name));
const runnable = peers.filter((p) => !p.missing);
/** Routers the client's TLS passes through (bulk, rate, idle); the cleartext ones run in `tunnel`. */
const passthrough = runnable.filter((p) => p.upstreams !== 'cleartext');
const log = (message: string): void => void process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

// ---------------------------------------------------------------- processes

interface Upstreams {
  portA: number;
  portB: number;
  stop(): Promise<void>;
}

async function startUpstreams(mode: string, env: Record<string, string> = {}, cpus = CLIENT_CPUS): Promise<Upstreams> {
  const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'upstream.js')], {
    cpus,
    env: { MODE: mode, TLS_KEY: cert.key, TLS_CERT: cert.cert, ...env },
    log: join(dir, 'upstream.log'),
    stdout: 'pipe',
  });
  const ports = await new JsonLines(child).next<{ portA: number; portB: number }>(15_000);
  return { ...ports, stop: () => stopChild(child) };
}

/** Runs one load process to completion and returns its JSON answer. */
async function runLoad<T>(mode: string, port: number, env: Record<string, string>, timeoutMs: number, cpus = CLIENT_CPUS): Promise<T> {
  const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'load.js')], {
    cpus,
    env: { LOAD_MODE: mode, PORT: String(port), HARD_TIMEOUT_MS: String(timeoutMs), ...env },
    log: join(dir, 'load.log'),
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

interface CheckResult {
  ok: boolean;
  results: Array<{ sni: string; alpn: string[]; expect: string; got: string }>;
}

function describeCheck(check: CheckResult): string {
  return check.results
    .filter((r) => r.got !== r.expect)
    .map((r) => `${r.sni}+[${r.alpn.join(',')}] went to ${r.got}, expected ${r.expect}`)
    .join('; ');
}

// ---------------------------------------------------------------- measurements

interface Measurement {
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
}

const measurements: Measurement[] = [];
const checks = new Map<string, string>(); // peer -> first routing-check failure

/** Starts `peer`, checks its routing, runs `body`, stops it; errors are recorded, not thrown. */
async function withPeer(
  workload: Workload,
  round: number,
  peer: Peer,
  ctx: PeerContext,
  body: (running: RunningPeer, m: Measurement) => Promise<void>,
  variant?: string,
): Promise<void> {
  const m: Measurement = { workload, round, peer: peer.name, derived: {}, ...(variant ? { variant } : {}) };
  measurements.push(m);
  let running: RunningPeer | undefined;
  try {
    running = await peer.start(ctx);
    if (peer.name !== 'direct') {
      m.check = await runLoad<CheckResult>('check', running.port, {}, 30_000);
      if (!m.check.ok && !checks.has(peer.name)) checks.set(peer.name, describeCheck(m.check));
    }
    await body(running, m);
  } catch (err) {
    m.error = (err as Error).message;
    log(`${workload} ${peer.name}${variant ? ` ${variant}` : ''}: ${m.error}`);
  } finally {
    await running?.stop();
  }
}

function rotate<T>(list: readonly T[], by: number): T[] {
  const k = list.length === 0 ? 0 : by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

async function bulk(): Promise<void> {
  const up = await startUpstreams('bulk', { BULK_BYTES: String(config.bulkBytes) });
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(passthrough, round - 1)) {
        const ctx: PeerContext = { dir, distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: ROUTER_CPUS, ...profiling };
        await withPeer('bulk', round, peer, ctx, async (running, m) => {
          const before = running.pid ? sample(running.pid) : undefined;
          const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean; misrouted: number }>(
            'bulk',
            running.port,
            { BULK_BYTES: String(config.bulkBytes), CONNS: '1' },
            120_000,
          );
          const after = running.pid ? sample(running.pid) : undefined;
          m.load = load;
          if (!load.complete) throw new Error(`bulk transfer incomplete (${load.bytes} bytes)`);
          m.derived.mbPerSecond = load.mbPerSecond;
          if (before && after) {
            m.before = before;
            m.after = after;
            m.cpuSeconds = after.cpuSeconds - before.cpuSeconds;
            m.derived.cpuSecondsPerGB = m.cpuSeconds / (load.bytes / 1e9);
            m.derived.systemSecondsPerGB = (after.systemSeconds - before.systemSeconds) / (load.bytes / 1e9);
            m.derived.rssMiB = after.rssKiB / 1024;
          }
          log(
            `bulk r${round} ${peer.name}: ${fmt(load.mbPerSecond)} MB/s${m.cpuSeconds !== undefined ? `, ${fmt(m.derived.cpuSecondsPerGB, 2)} CPU s/GB (sys ${fmt(m.derived.systemSecondsPerGB, 2)})` : ''}`,
          );
        });
      }
    }
  } finally {
    await up.stop();
  }
}

interface RateLoad {
  connections: number;
  failed: number;
  misrouted: number;
  perSecond: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
}

async function measureRate(running: RunningPeer, m: Measurement, durationMs: number, cpus: string | undefined): Promise<RateLoad> {
  const before = running.pid ? sample(running.pid) : undefined;
  const load = await runLoad<RateLoad>(
    'rate',
    running.port,
    { CONCURRENCY: String(config.rateConcurrency), DURATION_MS: String(durationMs) },
    durationMs + 30_000,
    cpus,
  );
  const after = running.pid ? sample(running.pid) : undefined;
  m.load = load as unknown as Record<string, unknown>;
  m.derived.perSecond = load.perSecond;
  m.derived.ttfbP50Ms = load.ttfbP50Ms;
  m.derived.ttfbP99Ms = load.ttfbP99Ms;
  if (before && after) {
    m.before = before;
    m.after = after;
    m.cpuSeconds = after.cpuSeconds - before.cpuSeconds;
    m.derived.cpuMicrosPerConnection = (m.cpuSeconds * 1e6) / Math.max(1, load.connections);
    m.derived.systemMicrosPerConnection = ((after.systemSeconds - before.systemSeconds) * 1e6) / Math.max(1, load.connections);
  }
  return load;
}

async function rate(): Promise<void> {
  const up = await startUpstreams('rate');
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(passthrough, round - 1)) {
        const ctx: PeerContext = { dir, distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: ROUTER_CPUS, ...profiling };
        await withPeer('rate', round, peer, ctx, async (running, m) => {
          if (config.rateWarmupMs > 0) {
            await runLoad(
              'rate',
              running.port,
              { CONCURRENCY: String(config.rateConcurrency), DURATION_MS: String(config.rateWarmupMs) },
              config.rateWarmupMs + 30_000,
            );
          }
          const load = await measureRate(running, m, config.rateMs, CLIENT_CPUS);
          log(
            `rate r${round} ${peer.name}: ${fmt(load.perSecond)} conn/s, ttfb p50 ${fmt(load.ttfbP50Ms, 2)} ms` +
              `${m.derived.cpuMicrosPerConnection !== undefined ? `, ${fmt(m.derived.cpuMicrosPerConnection)} µs/conn (sys ${fmt(m.derived.systemMicrosPerConnection)})` : ''}` +
              `${load.failed ? `, ${load.failed} failed` : ''}${load.misrouted ? `, ${load.misrouted} misrouted` : ''}`,
          );
        });
      }
    }
  } finally {
    await up.stop();
  }
}

async function idle(): Promise<void> {
  const up = await startUpstreams('idle');
  try {
    for (let round = 1; round <= config.idleRounds; round++) {
      // The tunnelled peers are left out: 5,000 idle clients are 5,000 streams in one tunnel, over the
      // session's 1,000-stream limit (lib/tunnel/settings.ts).
      for (const peer of rotate(
        passthrough.filter((p) => p.name !== 'direct' && p.name !== 'gate-mux-local-tunnel' && p.name !== 'gate-mux-peered'),
        round - 1,
      )) {
        // The Node routers answer a heap probe (bench/heap-probe.ts): live heap after a full GC.
        // Not a saved build given its own node flags (--ref-node-args replace these): without the
        // preload, SIGUSR2 would end it.
        const probed = peer.name.startsWith('gate-mux') && !(args.refNodeArgs && peer.name.startsWith('gate-mux-ref'));
        const nodeArgs = [
          ...(profiling.nodeArgs ?? []),
          ...(probed ? ['--expose-gc', '--import', join(distDir, 'bench', 'heap-probe.js')] : []),
        ];
        const ctx: PeerContext = { dir, distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: ROUTER_CPUS, nodeArgs };
        await withPeer('idle', round, peer, ctx, async (running, m) => {
          const pid = running.pid!;
          await sleep(300);
          const before = sample(pid);
          const heapBefore = probed ? await probeHeap(pid) : undefined;
          const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'load.js')], {
            cpus: CLIENT_CPUS,
            env: { LOAD_MODE: 'idle', PORT: String(running.port), COUNT: String(config.idleCount), HARD_TIMEOUT_MS: '180000' },
            log: join(dir, 'load.log'),
            stdout: 'pipe',
            stdin: 'pipe',
          });
          try {
            const lines = new JsonLines(child);
            const ready = await lines.next<{ established: number; failed: number }>(150_000);
            await sleep(1000);
            const open = sample(pid);
            const heapOpen = probed ? await probeHeap(pid) : undefined;
            child.stdin?.write('close\n');
            await lines.next(60_000);
            // Give the router time to notice the closes and its allocator/GC time to give back.
            const closedAt = Date.now();
            let after = sample(pid);
            const growth = open.rssKiB - before.rssKiB;
            // When the memory came back: the last poll that saw RSS drop by 5 % of the growth or more.
            let returnedAt = closedAt;
            for (let i = 0; i < RETURN_POLLS; i++) {
              if (after.fds <= before.fds && after.rssKiB - before.rssKiB <= 0.1 * growth) break;
              await sleep(500);
              const next = sample(pid);
              if (after.rssKiB - next.rssKiB >= 0.05 * growth) returnedAt = Date.now();
              after = next;
            }
            Object.assign(m, { before, open, after });
            m.load = { ...ready, returnWaitMs: Date.now() - closedAt };
            const n = Math.max(1, ready.established);
            m.derived.rssKiBPerConnection = growth / n;
            if (heapBefore && heapOpen) {
              m.derived.heapKiBPerConnection = (heapOpen.heapUsed - heapBefore.heapUsed) / 1024 / n;
              m.derived.externalKiBPerConnection = (heapOpen.external - heapBefore.external) / 1024 / n;
              m.derived.baseHeapMiB = heapBefore.heapUsed / 2 ** 20;
            }
            m.derived.baseRssMiB = before.rssKiB / 1024;
            m.derived.fdsPerConnection = (open.fds - before.fds) / n;
            m.derived.rssReturnedPct = growth > 0 ? (100 * (open.rssKiB - after.rssKiB)) / growth : 100;
            m.derived.fdsLeftAfterClose = after.fds - before.fds;
            m.derived.returnSeconds = (returnedAt - closedAt) / 1000;
            m.derived.established = ready.established;
            log(
              `idle r${round} ${peer.name}: ${ready.established} open, ${fmt(m.derived.rssKiBPerConnection, 1)} KiB/conn` +
                `${heapOpen ? ` (live heap ${fmt(m.derived.heapKiBPerConnection, 2)} + external ${fmt(m.derived.externalKiBPerConnection, 2)})` : ''}, base RSS ${fmt(m.derived.baseRssMiB, 1)} MiB, ` +
                `${fmt(m.derived.rssReturnedPct)}% returned, fds left ${m.derived.fdsLeftAfterClose}`,
            );
          } finally {
            await stopChild(child);
          }
        });
      }
    }
  } finally {
    await up.stop();
  }
}

/**
 * Asks a router started with the heap probe (bench/heap-probe.ts) for its memory after a full
 * GC; undefined when it did not answer (a build that cannot take the preload).
 */
async function probeHeap(pid: number): Promise<HeapProbe | undefined> {
  const file = heapProbeFile(pid);
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 100; i++) {
    await sleep(50);
    if (!existsSync(file)) continue;
    try {
      const probe = JSON.parse(readFileSync(file, 'utf8')) as HeapProbe;
      rmSync(file, { force: true });
      return probe;
    } catch {
      // written as we read: try again
    }
  }
  return undefined;
}

/** Live heap per idle connection may grow this much over the reference before the report says so. */
const IDLE_HEAP_TOLERANCE = 1.1;

interface IdleReference {
  commit: string;
  date: string;
  command: string;
  what: string;
  routers: Record<string, { rssKiBPerConnection?: number; heapKiBPerConnection?: number; baseRssMiB?: number }>;
}

/** The idle figures recorded at a known commit (bench/reference.json), or undefined without one. */
function idleReference(): IdleReference | undefined {
  try {
    return (JSON.parse(readFileSync(join(repoDir, 'bench', 'reference.json'), 'utf8')) as { idle?: IdleReference }).idle;
  } catch {
    return undefined;
  }
}

interface ParserRow {
  name: string;
  bytes: number;
  records: number;
  parsesPerSecond: number;
  detectsPerSecond: number;
  detectsTwoSegmentsPerSecond: number;
}
const parserRuns: ParserRow[][] = [];
let parserError: string | undefined;

async function parser(): Promise<void> {
  for (let round = 1; round <= config.rounds; round++) {
    const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'parser.js')], {
      cpus: ROUTER_CPUS,
      env: { DURATION_MS: String(config.parserMs) },
      log: join(dir, 'parser.log'),
      stdout: 'pipe',
    });
    try {
      const rows = await new JsonLines(child).next<ParserRow[]>(60_000);
      parserRuns.push(rows);
      log(`parser r${round}: ${rows.map((r) => `${r.name} ${fmt(r.parsesPerSecond)}/s`).join(', ')}`);
    } catch (err) {
      parserError = `${(err as Error).message} (see ${join(dir, 'parser.log')})`;
      log(`parser: ${parserError}`);
      return;
    } finally {
      await stopChild(child);
    }
  }
}

const WORKER_VARIANTS = [
  { variant: '1 (single process)', env: {} as Record<string, string> },
  { variant: '2 (cluster, shared socket)', env: { WORKERS: '2' } },
  { variant: '2 (cluster, round-robin)', env: { WORKERS: '2', CLUSTER_SCHEDULING: 'round-robin' } },
];

async function workers(): Promise<void> {
  const gate = runnable.find((p) => p.name === 'gate-mux');
  if (!gate) return;
  const variants = quick ? WORKER_VARIANTS.slice(0, 2) : WORKER_VARIANTS;
  // Every process unpinned: the point is to let the router use both cores.
  for (const [mode, env] of [
    ['bulk', { BULK_BYTES: String(config.workersBulkBytes) }],
    ['rate', {}],
  ] as const) {
    const up = await startUpstreams(mode, env, undefined);
    try {
      for (let round = 1; round <= config.workersRounds; round++) {
        for (const v of rotate(variants, round - 1)) {
          const ctx: PeerContext = { dir, distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: undefined, env: v.env };
          await withPeer(
            'workers',
            round,
            gate,
            ctx,
            async (running, m) => {
              m.derived.kind = mode === 'bulk' ? 0 : 1;
              if (mode === 'bulk') {
                const before = sample(running.pid!);
                const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean }>(
                  'bulk',
                  running.port,
                  { BULK_BYTES: String(config.workersBulkBytes), CONNS: '2' },
                  120_000,
                  undefined,
                );
                const after = sample(running.pid!);
                m.load = load;
                m.cpuSeconds = after.cpuSeconds - before.cpuSeconds;
                m.derived.mbPerSecond = load.mbPerSecond;
                m.derived.cpuSecondsPerGB = m.cpuSeconds / (load.bytes / 1e9);
                log(`workers bulk r${round} ${v.variant}: ${fmt(load.mbPerSecond)} MB/s, ${fmt(m.derived.cpuSecondsPerGB, 2)} CPU s/GB`);
              } else {
                const load = await measureRate(running, m, config.workersRateMs, undefined);
                log(`workers rate r${round} ${v.variant}: ${fmt(load.perSecond)} conn/s, ${fmt(m.derived.cpuMicrosPerConnection)} µs/conn`);
              }
            },
            v.variant,
          );
        }
      }
    } finally {
      await up.stop();
    }
  }
}

const TUNNEL_PEER = 'gate-mux-tunnel';
const TERMINATE_PEER = 'gate-mux-terminate';
const UPGRADED_PEER = 'gate-mux-tunnel-upgraded';

/**
 * The tunnel against the direct route: both routers end the client's TLS; the upstream sends `tunnelBytes` in
 * cleartext, to the proxy directly (terminate + forward) or through the agent's tunnel. The proxy
 * process and the agent process (the router's child, pinned to the client core as the far side of
 * a network would be) are measured apart. Then, per round, the stream setup on a quiet tunnel.
 */
async function tunnel(): Promise<void> {
  const routers = runnable.filter((p) => p.upstreams === 'cleartext');
  if (routers.length === 0) return;
  const up = await startUpstreams('bulk', { BULK_BYTES: String(config.tunnelBytes), PLAIN: '1' });
  const env = { TLS_KEY: cert.key, TLS_CERT: cert.cert, ...(CLIENT_CPUS ? { AGENT_CPUS: CLIENT_CPUS } : {}) };
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(routers, round - 1)) {
        const ctx: PeerContext = { dir, distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: ROUTER_CPUS, env, ...profiling };
        await withPeer('tunnel', round, peer, ctx, async (running, m) => {
          const pid = running.pid!;
          const [before, proxyBefore] = [sample(pid), sampleProcess(pid)];
          const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean; misrouted: number }>(
            'bulk',
            running.port,
            { BULK_BYTES: String(config.tunnelBytes), CONNS: '1' },
            180_000,
          );
          const [after, proxyAfter] = [sample(pid), sampleProcess(pid)];
          m.load = load;
          if (!load.complete) throw new Error(`transfer incomplete (${load.bytes} bytes)`);
          Object.assign(m, { before, after });
          const gb = load.bytes / 1e9;
          const proxyCpu = proxyAfter.cpuSeconds - proxyBefore.cpuSeconds;
          m.cpuSeconds = after.cpuSeconds - before.cpuSeconds;
          m.derived.mbPerSecond = load.mbPerSecond;
          m.derived.proxyCpuSecondsPerGB = proxyCpu / gb;
          m.derived.proxySystemSecondsPerGB = (proxyAfter.systemSeconds - proxyBefore.systemSeconds) / gb;
          m.derived.agentCpuSecondsPerGB = (m.cpuSeconds - proxyCpu) / gb;
          m.derived.agentSystemSecondsPerGB =
            (after.systemSeconds - before.systemSeconds - (proxyAfter.systemSeconds - proxyBefore.systemSeconds)) / gb;
          log(
            `tunnel r${round} ${peer.name}: ${fmt(load.mbPerSecond)} MB/s, proxy ${fmt(m.derived.proxyCpuSecondsPerGB, 2)} CPU s/GB` +
              `${peer.name.startsWith(TUNNEL_PEER) ? `, agent ${fmt(m.derived.agentCpuSecondsPerGB, 2)}` : ''}`,
          );
        });
      }
      if (routers.some((p) => p.name === TUNNEL_PEER)) await streamSetup(round, up.portA);
      if (routers.some((p) => p.name === UPGRADED_PEER)) await upgradeSetup(round);
    }
  } finally {
    await up.stop();
  }
}

async function streamSetup(round: number, targetPort: number): Promise<void> {
  const m: Measurement = { workload: 'tunnel', round, peer: TUNNEL_PEER, variant: 'setup', derived: {} };
  measurements.push(m);
  const child = spawnPinned(
    process.execPath,
    [...GATE_MUX_NODE_FLAGS, ...(profiling.nodeArgs ?? []), join(distDir, 'bench', 'tunnel-setup.js')],
    {
      cpus: ROUTER_CPUS,
      env: {
        TARGET: `127.0.0.1:${targetPort}`,
        COUNT: String(config.tunnelSetupCount),
        WARMUP: String(config.tunnelSetupWarmup),
        ...(CLIENT_CPUS ? { AGENT_CPUS: CLIENT_CPUS } : {}),
      },
      log: join(dir, 'tunnel-setup.log'),
      stdout: 'pipe',
    },
  );
  try {
    const result = await new JsonLines(child).next<{ count: number; p50Ms: number; p99Ms: number }>(120_000);
    m.load = result;
    m.derived.setupP50Ms = result.p50Ms;
    m.derived.setupP99Ms = result.p99Ms;
    log(`tunnel r${round} stream setup: p50 ${fmt(result.p50Ms, 2)} ms, p99 ${fmt(result.p99Ms, 2)} ms (${result.count} streams)`);
  } catch (err) {
    m.error = `stream setup: ${(err as Error).message} (see ${join(dir, 'tunnel-setup.log')})`;
    log(m.error);
  } finally {
    await stopChild(child);
  }
}

/** New-connection setup (dial, TLS, one echoed byte) direct and through the connection upgrade (bench/upgrade-setup.ts). */
async function upgradeSetup(round: number): Promise<void> {
  const m: Measurement = { workload: 'tunnel', round, peer: UPGRADED_PEER, variant: 'setup', derived: {} };
  measurements.push(m);
  const child = spawnPinned(
    process.execPath,
    [...GATE_MUX_NODE_FLAGS, ...(profiling.nodeArgs ?? []), join(distDir, 'bench', 'upgrade-setup.js')],
    {
      cpus: ROUTER_CPUS,
      env: { COUNT: String(config.tunnelSetupCount), WARMUP: String(config.tunnelSetupWarmup) },
      log: join(dir, 'upgrade-setup.log'),
      stdout: 'pipe',
    },
  );
  type Way = { p50Ms: number; p99Ms: number; cpuMsPerConn: number };
  try {
    const result = await new JsonLines(child).next<{ count: number; direct: Way; upgraded: Way }>(180_000);
    m.load = result;
    for (const way of ['direct', 'upgraded'] as const) {
      m.derived[`${way}SetupP50Ms`] = result[way].p50Ms;
      m.derived[`${way}SetupP99Ms`] = result[way].p99Ms;
      m.derived[`${way}SetupCpuMs`] = result[way].cpuMsPerConn;
    }
    log(
      `tunnel r${round} connection setup: direct p50 ${fmt(result.direct.p50Ms, 2)} ms (${fmt(result.direct.cpuMsPerConn, 2)} CPU ms), ` +
        `upgraded p50 ${fmt(result.upgraded.p50Ms, 2)} ms (${fmt(result.upgraded.cpuMsPerConn, 2)} CPU ms)`,
    );
  } catch (err) {
    m.error = `upgrade setup: ${(err as Error).message} (see ${join(dir, 'upgrade-setup.log')})`;
    log(m.error);
  } finally {
    await stopChild(child);
  }
}

// ---------------------------------------------------------------- report

function medianOf(workload: Workload, peer: string, key: string, filter: (m: Measurement) => boolean = () => true): number | undefined {
  const values = measurements.filter((m) => m.workload === workload && m.peer === peer && !m.error && filter(m)).map((m) => m.derived[key]);
  const defined = values.filter((v): v is number => v !== undefined);
  return defined.length ? median(defined) : undefined;
}

function rowsFor(workload: Workload, cells: (peer: Peer) => string[], include: (p: Peer) => boolean = () => true): string[][] {
  const kind = (p: Peer): boolean => (workload === 'tunnel') === (p.upstreams === 'cleartext');
  return peers
    .filter((p) => kind(p) && include(p))
    .map((p) => {
      if (p.missing)
        return [
          p.name,
          `not run: ${p.missing}`,
          ...cells(p)
            .slice(1)
            .map(() => ''),
        ];
      const failed = measurements.filter((m) => m.workload === workload && m.peer === p.name && m.error);
      const ok = measurements.some((m) => m.workload === workload && m.peer === p.name && !m.error);
      if (!ok && failed.length)
        return [
          p.name,
          `failed: ${failed[0]!.error}`,
          ...cells(p)
            .slice(1)
            .map(() => ''),
        ];
      return [p.name, ...cells(p)];
    });
}

function tunnelReport(out: string[]): void {
  out.push(
    '',
    `## Tunnelled path: the client's TLS ends at the proxy, upstream sends ${fmt(config.tunnelBytes / 2 ** 20)} MiB in cleartext`,
    '',
  );
  const bulkOnly = (m: Measurement): boolean => m.variant !== 'setup';
  const pick = (peer: string, key: string): number | undefined => medianOf('tunnel', peer, key, bulkOnly);
  const base = { mb: pick(TERMINATE_PEER, 'mbPerSecond'), cpu: pick(TERMINATE_PEER, 'proxyCpuSecondsPerGB') };
  out.push(
    markdownTable(
      ['route', 'MB/s', '× forward', 'proxy CPU s/GB', '× forward', 'proxy sys s/GB', 'agent CPU s/GB'],
      rowsFor('tunnel', (p) => {
        const mb = pick(p.name, 'mbPerSecond');
        const cpu = pick(p.name, 'proxyCpuSecondsPerGB');
        const agent = p.name.startsWith(TUNNEL_PEER)
          ? `${fmt(pick(p.name, 'agentCpuSecondsPerGB'), 2)} (sys ${fmt(pick(p.name, 'agentSystemSecondsPerGB'), 2)})`
          : '—';
        return [fmt(mb), ratio(mb, base.mb), fmt(cpu, 2), ratio(cpu, base.cpu), fmt(pick(p.name, 'proxySystemSecondsPerGB'), 2), agent];
      }),
    ),
  );
  out.push(
    '',
    '`gate-mux-terminate`: terminate + forward to the upstream. `gate-mux-tunnel`: terminate, then one HTTP/2 CONNECT stream in the reverse tunnel an agent process holds (mutual TLS); the agent runs on the client core, the proxy alone on the router core.',
  );
  const setup = (key: string): number | undefined => medianOf('tunnel', TUNNEL_PEER, key, (m) => m.variant === 'setup');
  const p50 = setup('setupP50Ms');
  if (p50 !== undefined) {
    out.push(
      '',
      `Stream setup over the established tunnel (CONNECT -> 200, ${config.tunnelSetupCount} new streams one after another on a quiet tunnel, after ${config.tunnelSetupWarmup} unmeasured; median of rounds): p50 ${fmt(p50, 2)} ms, p99 ${fmt(setup('setupP99Ms'), 2)} ms.`,
    );
  }
  const mb = pick(TUNNEL_PEER, 'mbPerSecond');
  const cpu = pick(TUNNEL_PEER, 'proxyCpuSecondsPerGB');
  if (mb !== undefined && cpu !== undefined && base.mb !== undefined && base.cpu !== undefined) {
    const verdict = (ok: boolean): string => (ok ? 'met' : 'not met');
    out.push(
      '',
      `Aims: proxy CPU per GB within 1.5× of forward: ${ratio(cpu, base.cpu)}, ${verdict(cpu <= 1.5 * base.cpu)}; MB/s at least 0.8× forward: ${ratio(mb, base.mb)}, ${verdict(mb >= 0.8 * base.mb)}.`,
    );
  }
  upgradeReport(out, pick);
}

/** The connection upgrade against the direct tunnel (its aims), and new-connection setup both ways. */
function upgradeReport(out: string[], pick: (peer: string, key: string) => number | undefined): void {
  const [mb, mbUp] = [pick(TUNNEL_PEER, 'mbPerSecond'), pick(UPGRADED_PEER, 'mbPerSecond')];
  const both = (peer: string): number | undefined => {
    const [proxy, agent] = [pick(peer, 'proxyCpuSecondsPerGB'), pick(peer, 'agentCpuSecondsPerGB')];
    return proxy === undefined || agent === undefined ? undefined : proxy + agent;
  };
  const [cpu, cpuUp] = [both(TUNNEL_PEER), both(UPGRADED_PEER)];
  if (mb !== undefined && mbUp !== undefined && cpu !== undefined && cpuUp !== undefined) {
    const verdict = (ok: boolean): string => (ok ? 'met' : 'not met');
    out.push(
      '',
      `\`${UPGRADED_PEER}\`: the same tunnel with the agent behind the connection upgrade (TLS to the listener, WebSocket binary messages, the tunnel's TLS inside). ` +
        `Aims against \`${TUNNEL_PEER}\`: MB/s at least 0.7×: ${ratio(mbUp, mb)}, ${verdict(mbUp >= 0.7 * mb)}; proxy + agent CPU per GB (${fmt(cpuUp, 2)} against ${fmt(cpu, 2)} s/GB) within 1.5×: ${ratio(cpuUp, cpu)}, ${verdict(cpuUp <= 1.5 * cpu)}.`,
    );
  }
  const setup = (key: string): number | undefined => medianOf('tunnel', UPGRADED_PEER, key, (m) => m.variant === 'setup');
  const [direct, upgraded] = [setup('directSetupP50Ms'), setup('upgradedSetupP50Ms')];
  if (direct !== undefined && upgraded !== undefined) {
    out.push(
      '',
      `New-connection setup (dialTls with a client certificate, then one echoed byte; client and proxy in one process; ${config.tunnelSetupCount} one after another; median of rounds): ` +
        `direct p50 ${fmt(direct, 2)} ms, p99 ${fmt(setup('directSetupP99Ms'), 2)} ms, ${fmt(setup('directSetupCpuMs'), 2)} CPU ms; ` +
        `through the upgrade p50 ${fmt(upgraded, 2)} ms, p99 ${fmt(setup('upgradedSetupP99Ms'), 2)} ms, ${fmt(setup('upgradedSetupCpuMs'), 2)} CPU ms.`,
    );
  }
}

function report(startedAt: Date, seconds: number): string {
  const out: string[] = [];
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  out.push(`# gate-mux benchmark`);
  out.push('');
  out.push(`- Date: ${startedAt.toISOString()}, ${fmt(seconds)} s`);
  out.push(`- Machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB RAM, Linux ${release()}, Node ${process.version}`);
  out.push(
    `- Peers: ${peers.map((p) => `${p.name}${p.version ? ` (${p.version})` : ''}${p.missing ? ` — ${p.missing}` : ''}`).join(', ')}`,
  );
  out.push(`- Command: \`npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}\``);
  out.push(
    `- Layout: ${twoCores ? 'router pinned to CPU 1 (`taskset -c 1`), clients and upstreams to CPU 0' : 'one core: nothing pinned'}; ` +
      `every router runs one worker; peers interleaved round by round; medians of ${config.rounds} rounds (idle: ${config.idleRounds}).`,
  );
  out.push(`- Router CPU = utime+stime of the router's process tree from /proc/<pid>/stat; RSS = VmRSS; fds = /proc/<pid>/fd.`);
  const direct = (key: string, w: Workload): number | undefined => medianOf(w, 'direct', key);
  const nginx = (key: string, w: Workload): number | undefined => medianOf(w, 'nginx', key);
  if (checks.size) {
    out.push('');
    out.push(
      `**Routing check failures** (same rule for every peer; measured anyway): ${[...checks].map(([p, why]) => `${p}: ${why}`).join('; ')}`,
    );
  }

  if (args.only.has('bulk')) {
    out.push('', `## Bulk: one TLS connection through the router, upstream sends ${fmt(config.bulkBytes / 2 ** 20)} MiB`, '');
    out.push(
      markdownTable(
        ['router', 'MB/s', '× direct', 'router CPU s/GB', 'CPU × nginx', 'router RSS MiB'],
        rowsFor('bulk', (p) => {
          const mb = medianOf('bulk', p.name, 'mbPerSecond');
          const cpuGb = medianOf('bulk', p.name, 'cpuSecondsPerGB');
          return [
            fmt(mb),
            ratio(mb, direct('mbPerSecond', 'bulk')),
            fmt(cpuGb, 2),
            ratio(cpuGb, nginx('cpuSecondsPerGB', 'bulk')),
            fmt(medianOf('bulk', p.name, 'rssMiB'), 1),
          ];
        }),
      ),
    );
  }
  if (args.only.has('rate')) {
    out.push(
      '',
      `## Connection rate: ${config.rateConcurrency} concurrent clients, full TLS 1.3 handshake (ECDSA P-256), 1 KiB response, close; ${fmt(config.rateMs / 1000, 1)} s per round${config.rateWarmupMs > 0 ? ` after ${fmt(config.rateWarmupMs / 1000, 1)} s unmeasured warm-up` : ', no warm-up'}`,
      '',
    );
    out.push(
      markdownTable(
        ['router', 'conn/s', '× direct', 'TTFB p50 ms', 'TTFB p99 ms', 'router CPU µs/conn', 'CPU × nginx'],
        rowsFor('rate', (p) => {
          const cps = medianOf('rate', p.name, 'perSecond');
          const us = medianOf('rate', p.name, 'cpuMicrosPerConnection');
          return [
            fmt(cps),
            ratio(cps, direct('perSecond', 'rate')),
            fmt(medianOf('rate', p.name, 'ttfbP50Ms'), 2),
            fmt(medianOf('rate', p.name, 'ttfbP99Ms'), 2),
            fmt(us),
            ratio(us, nginx('cpuMicrosPerConnection', 'rate')),
          ];
        }),
      ),
    );
    if (peers.some((p) => p.name === 'gate-mux-peered')) {
      out.push(
        '',
        "`gate-mux-local-tunnel` and `gate-mux-peered`: upstream A behind an agent's tunnel, the client's TLS passed through; the tunnel is held by the router itself, or by another proxy: per connection a route-store lookup (in memory), a CONNECT stream in the peering session, and one in the tunnel; the CPU is every process of the path. `gate-mux-peered` minus `gate-mux-local-tunnel` is the peering hop.",
      );
    }
  }
  if (args.only.has('idle')) {
    out.push('', `## Idle: ${fmt(config.idleCount)} established TLS connections held open, then closed`, '');
    const ref = idleReference();
    const refCell = (p: Peer, key: 'rssKiBPerConnection' | 'heapKiBPerConnection', digits: number): string => {
      const value = ref?.routers[p.name]?.[key];
      return value === undefined ? '—' : fmt(value, digits);
    };
    out.push(
      markdownTable(
        [
          'router',
          'RSS KiB/conn',
          `at ${ref ? ref.commit : 'the reference'}`,
          'live heap KiB/conn',
          `at ${ref ? ref.commit : 'the reference'}`,
          'base RSS MiB',
          'fds/conn',
          'RSS returned after close',
          'within s',
          'fds left after close',
        ],
        rowsFor(
          'idle',
          (p) => [
            fmt(medianOf('idle', p.name, 'rssKiBPerConnection'), 1),
            refCell(p, 'rssKiBPerConnection', 1),
            fmt(medianOf('idle', p.name, 'heapKiBPerConnection'), 2),
            refCell(p, 'heapKiBPerConnection', 2),
            fmt(medianOf('idle', p.name, 'baseRssMiB'), 1),
            fmt(medianOf('idle', p.name, 'fdsPerConnection'), 2),
            `${fmt(medianOf('idle', p.name, 'rssReturnedPct'))} %`,
            fmt(medianOf('idle', p.name, 'returnSeconds'), 1),
            fmt(medianOf('idle', p.name, 'fdsLeftAfterClose')),
          ],
          // The tunnelled routes are not run idle (see idle()).
          (p) => p.name !== 'direct' && p.name !== 'gate-mux-local-tunnel' && p.name !== 'gate-mux-peered',
        ),
      ),
    );
    if (ref) {
      out.push(
        '',
        `Reference: ${ref.what}, measured on ${ref.commit} (${ref.date}): \`${ref.command}\`. Live heap = the V8 heap after a full GC (bench/heap-probe.ts), the figure that repeats between runs; RSS moves with when V8 last collected.`,
      );
      for (const p of peers) {
        const now = medianOf('idle', p.name, 'heapKiBPerConnection');
        const then = ref.routers[p.name]?.heapKiBPerConnection;
        if (now !== undefined && then !== undefined && now > then * IDLE_HEAP_TOLERANCE + 0.05) {
          const line = `**${p.name} holds more per idle connection than at ${ref.commit}: ${fmt(now, 2)} against ${fmt(then, 2)} KiB of live heap.**`;
          out.push('', line);
          log(line.replace(/\*/g, ''));
        }
      }
    }
  }
  if (args.only.has('parser')) {
    out.push('', `## Parser: ClientHellos per second on one core (median of ${parserRuns.length} rounds)`, '');
    if (parserError) out.push(`failed: ${parserError}`);
    else {
      const names = parserRuns[0]?.map((r) => r.name) ?? [];
      const rows = names.map((name) => {
        const pick = (key: keyof ParserRow): number => median(parserRuns.map((run) => Number(run.find((r) => r.name === name)?.[key])));
        const first = parserRuns[0]!.find((r) => r.name === name)!;
        return [
          name,
          fmt(first.bytes),
          fmt(first.records),
          fmt(pick('parsesPerSecond')),
          fmt(pick('detectsPerSecond')),
          fmt(pick('detectsTwoSegmentsPerSecond')),
        ];
      });
      out.push(
        markdownTable(['hello', 'bytes', 'records', 'parseClientHello/s', 'Detector/s (one read)', 'Detector/s (two TCP segments)'], rows),
      );
    }
  }
  if (args.only.has('workers')) {
    out.push('', `## Workers: gate-mux on all cores (node:cluster), router and clients unpinned`, '');
    const variants = quick ? WORKER_VARIANTS.slice(0, 2) : WORKER_VARIANTS;
    const pick = (variant: string, kind: number, key: string): number | undefined =>
      medianOf('workers', 'gate-mux', key, (m) => m.variant === variant && m.derived.kind === kind);
    out.push(
      markdownTable(
        [
          'workers',
          `bulk MB/s (2 connections × ${fmt(config.workersBulkBytes / 2 ** 20)} MiB)`,
          'router CPU s/GB',
          'conn/s (64 clients)',
          'router CPU µs/conn',
        ],
        variants.map((v) => [
          v.variant,
          fmt(pick(v.variant, 0, 'mbPerSecond')),
          fmt(pick(v.variant, 0, 'cpuSecondsPerGB'), 2),
          fmt(pick(v.variant, 1, 'perSecond')),
          fmt(pick(v.variant, 1, 'cpuMicrosPerConnection')),
        ]),
      ),
    );
    out.push(
      '',
      'On a 2-core machine the clients and upstreams compete with the workers for the same cores, so this shows the scaling trend, not a limit.',
    );
  }
  if (args.only.has('tunnel') && peers.some((p) => p.upstreams === 'cleartext')) tunnelReport(out);
  const errors = measurements.filter((m) => m.error);
  if (errors.length) {
    out.push(
      '',
      `## Errors`,
      '',
      ...errors.map((m) => `- ${m.workload} r${m.round} ${m.peer}${m.variant ? ` ${m.variant}` : ''}: ${m.error}`),
    );
  }
  return `${out.join('\n')}\n`;
}

/** An SVG chart per workload that ran (bench/charts.ts): the figures of its table, one bar per router. */
function charts(startedAt: Date): Array<[Workload, string]> {
  const subtitle = `${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, Node ${process.version}; medians (npm run bench)`;
  const panel = (
    workload: Workload,
    title: string,
    key: string,
    better: ChartPanel['better'],
    digits: number,
    filter?: (m: Measurement) => boolean,
  ): ChartPanel => ({
    title,
    better,
    digits,
    bars: peers
      .filter((p) => !p.missing && (workload === 'tunnel') === (p.upstreams === 'cleartext'))
      .map((p): [string, number | undefined] => [p.name, medianOf(workload, p.name, key, filter)]),
  });
  const out: Array<[Workload, string]> = [];
  const add = (workload: Workload, title: string, panels: ChartPanel[], note = ''): void => {
    if (args.only.has(workload) && measurements.some((m) => m.workload === workload && !m.error))
      out.push([workload, chartSvg(title, `${subtitle}${note}`, panels)]);
  };
  add('bulk', 'Bulk: one TLS connection, upstream to client', [
    panel('bulk', 'MB/s', 'mbPerSecond', 'higher', 0),
    panel('bulk', 'router CPU s per GB', 'cpuSecondsPerGB', 'lower', 2),
  ]);
  add(
    'rate',
    `Connection rate: ${config.rateConcurrency} clients, full TLS handshakes`,
    [
      panel('rate', 'router CPU µs per connection', 'cpuMicrosPerConnection', 'lower', 0),
      panel('rate', 'connections per second', 'perSecond', 'higher', 0),
      panel('rate', 'time to first byte p50, ms', 'ttfbP50Ms', 'lower', 1),
    ],
    '; tunnelled routes: CPU of every process of the path',
  );
  add('idle', `Idle: ${fmt(config.idleCount)} TLS connections held open`, [
    panel('idle', 'RSS KiB per connection', 'rssKiBPerConnection', 'lower', 1),
    panel('idle', 'live heap KiB per connection (after a full GC)', 'heapKiBPerConnection', 'lower', 2),
  ]);
  const bulkOnly = (m: Measurement): boolean => m.variant !== 'setup';
  add('tunnel', "Tunnelled path: the client's TLS ends at the proxy", [
    panel('tunnel', 'MB/s', 'mbPerSecond', 'higher', 0, bulkOnly),
    panel('tunnel', 'proxy CPU s per GB', 'proxyCpuSecondsPerGB', 'lower', 2, bulkOnly),
  ]);
  return out;
}

// ---------------------------------------------------------------- main

const startedAt = new Date();
log(`temp dir ${dir}; peers: ${peers.map((p) => (p.missing ? `${p.name} (${p.missing})` : p.name)).join(', ')}`);
try {
  if (args.only.has('parser')) await parser();
  if (args.only.has('bulk')) await bulk();
  if (args.only.has('rate')) await rate();
  if (args.only.has('idle')) await idle();
  if (args.only.has('workers')) await workers();
  if (args.only.has('tunnel')) await tunnel();
} finally {
  const seconds = (Date.now() - startedAt.getTime()) / 1000;
  const markdown = report(startedAt, seconds);
  const resultsDir = join(repoDir, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
  const json = JSON.stringify(
    {
      startedAt: startedAt.toISOString(),
      seconds,
      argv: process.argv.slice(2),
      config,
      machine: { cpus: cpus().length, model: cpus()[0]?.model, totalMemBytes: totalmem(), kernel: release(), node: process.version },
      peers: peers.map((p) => ({ name: p.name, version: p.version, missing: p.missing })),
      routingCheckFailures: Object.fromEntries(checks),
      parser: { runs: parserRuns, error: parserError },
      measurements,
    },
    null,
    2,
  );
  const svgs = charts(startedAt);
  for (const name of [stamp, 'latest']) {
    writeFileSync(join(resultsDir, `${name}.json`), json);
    writeFileSync(join(resultsDir, `${name}.md`), markdown);
    for (const [workload, svg] of svgs) writeFileSync(join(resultsDir, `${name}-${workload}.svg`), svg);
  }
  process.stdout.write(markdown);
  log(
    `wrote ${join(resultsDir, `${stamp}.{json,md}`)}${svgs.length ? ` and ${svgs.map(([w]) => `${stamp}-${w}.svg`).join(', ')}` : ''} in ${fmt(seconds)} s`,
  );
  if (!args.keep) rmSync(dir, { recursive: true, force: true });
}
