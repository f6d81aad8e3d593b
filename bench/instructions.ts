// `npm run bench:instructions`: user-space instructions per routed connection, counted by
// valgrind's callgrind for each router (every thread and process of it). Unlike CPU time, the
// count repeats to within about 1 % whatever else the machine does, so a change of a few percent
// shows on a busy machine and in two consecutive runs; kernel time is not in it (see the rate
// workload of `npm run bench` for that). Each router serves WARMUP connections first (JIT
// warm-up; counters zeroed after), then COUNT measured ones: the rate workload's TLS
// handshakes, 8 at a time.
//
//   npm run bench:instructions                              gate-mux (-native, -native-splice), node-baseline, haproxy, nginx
//   npm run bench:instructions -- --peers gate-mux --compare /tmp/before/dist/bench/router.js
//   npm run bench:instructions -- --warmup 3000 --count 300
//   npm run bench:instructions -- --peers gate-mux-native --keep   keep the callgrind files to annotate
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeBenchCert } from './certs.js';
import { allPeers, type PeerContext } from './peers.js';
import { JsonLines, spawnPinned, stopChild } from './spawn.js';
import { markdownTable } from './stats.js';
import { findBinary } from '../test/helpers/peers.js';

const distDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function parseArgs(argv: string[]): { peers: string[]; compare: string[]; warmup: number; count: number; keep: boolean } {
  let peers = ['gate-mux', 'gate-mux-native', 'gate-mux-native-splice', 'node-baseline', 'haproxy', 'nginx'];
  let compare: string[] = [];
  let warmup = 3000;
  let count = 300;
  let keep = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--peers') peers = value().split(',');
    else if (arg === '--compare') compare = value().split(',').map((p) => resolve(p));
    else if (arg === '--warmup') warmup = Number(value());
    else if (arg === '--count') count = Number(value());
    else if (arg === '--keep') keep = true;
    else throw new Error(`unknown option ${arg} (--peers, --compare, --warmup, --count)`);
  }
  if (compare.length > 0) peers.push(...compare.map((_, i) => `gate-mux-ref${i === 0 ? '' : i + 1}`));
  return { peers, compare, warmup, count, keep };
}

function log(message: string): void {
  process.stderr.write(`[instructions] ${message}\n`);
}

/** Sum of the `summary:` totals of the callgrind dumps `<prefix>.<pid>.1` (one per process). */
function dumpedInstructions(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    if (!/^cg\.\d+\.1$/.test(name)) continue;
    const match = /^summary: (\d+)$/m.exec(readFileSync(join(dir, name), 'utf8'));
    if (match) total += Number(match[1]);
  }
  return total;
}

async function runLoad(port: number, connections: number, dir: string): Promise<{ connections: number; failed: number }> {
  const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'load.js')], {
    cpus: undefined,
    env: { LOAD_MODE: 'rate', PORT: String(port), COUNT: String(connections), CONCURRENCY: '8', DURATION_MS: '900000', HARD_TIMEOUT_MS: '960000' },
    log: join(dir, 'load.log'),
    stdout: 'pipe',
  });
  try {
    return await new JsonLines(child).next<{ connections: number; failed: number }>(960_000);
  } finally {
    await stopChild(child);
  }
}

function callgrindControl(flag: '-z' | '-d'): void {
  // No pid: every callgrind run of this user, which is the one router (and its workers) now.
  execFileSync('callgrind_control', [flag], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (!findBinary('valgrind') || !findBinary('callgrind_control')) {
    process.stderr.write('bench:instructions needs valgrind: apt-get install valgrind\n');
    process.exit(2);
  }
  const dir = mkdtempSync(join(tmpdir(), 'gate-mux-instr-'));
  const cert = makeBenchCert(dir);
  const upstreams = spawnPinned(process.execPath, [join(distDir, 'bench', 'upstream.js')], {
    cpus: undefined,
    env: { MODE: 'rate', TLS_KEY: cert.key, TLS_CERT: cert.cert },
    log: join(dir, 'upstream.log'),
    stdout: 'pipe',
  });
  const rows: string[][] = [];
  try {
    const ports = await new JsonLines(upstreams).next<{ portA: number; portB: number }>(15_000);
    const peers = allPeers(args.compare).filter((p) => args.peers.includes(p.name));
    for (const peer of peers) {
      if (peer.missing) {
        rows.push([peer.name, 'missing', peer.missing, '']);
        continue;
      }
      const runDir = mkdtempSync(join(dir, `${peer.name}-`));
      const ctx: PeerContext = {
        dir: runDir,
        distDir,
        upstreamA: ports.portA,
        upstreamB: ports.portB,
        cpus: undefined,
        wrap: {
          // JIT code is written at run time: callgrind must re-read code it already translated.
          command: ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${join(runDir, 'cg.%p')}`],
          startTimeoutMs: 120_000,
        },
      };
      log(`${peer.name}: starting under callgrind`);
      const running = await peer.start(ctx);
      try {
        const warm = await runLoad(running.port, args.warmup, dir);
        callgrindControl('-z');
        const measured = await runLoad(running.port, args.count, dir);
        callgrindControl('-d');
        const perConnection = dumpedInstructions(runDir) / Math.max(1, measured.connections);
        log(`${peer.name}: ${Math.round(perConnection).toLocaleString('en-US')} instructions per connection (${warm.connections} warm-up, ${measured.connections} measured, ${warm.failed + measured.failed} failed)`);
        rows.push([peer.name, Math.round(perConnection).toLocaleString('en-US'), String(measured.connections), String(warm.failed + measured.failed)]);
      } finally {
        await running.stop();
      }
    }
  } finally {
    await stopChild(upstreams);
    if (args.keep) log(`callgrind files kept in ${dir} (callgrind_annotate <file>)`);
    else rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`\nUser-space instructions per routed connection (callgrind; ${args.warmup} warm-up connections, then ${args.count} measured, 8 concurrent TLS handshakes)\n\n`);
  process.stdout.write(`${markdownTable(['router', 'instructions/conn', 'connections', 'failed'], rows)}\n`);
}

await main();
