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
//   npm run bench:instructions -- --peers gate-mux-peered --compare /tmp/before/dist/bench/peered-router.js
//     the tunnelled routes of a saved build too (gate-mux-local-tunnel-ref, gate-mux-peered-ref)
//   npm run bench:instructions -- --warmup 3000 --count 300
//   npm run bench:instructions -- --peers gate-mux-native --keep   keep the callgrind files to annotate
//   npm run bench:instructions -- --peers gate-mux,gate-mux-local-tunnel,gate-mux-peered   the central path's
//     three routes; each process of a route (proxy, holder proxy, agent) counted apart
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeBenchCert } from './certs.js';
import { allPeers, comparePeers, type PeerContext } from './peers.js';
import { descendants } from './proc.js';
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
    else if (arg === '--compare')
      compare = value()
        .split(',')
        .map((p) => resolve(p));
    else if (arg === '--warmup') warmup = Number(value());
    else if (arg === '--count') count = Number(value());
    else if (arg === '--keep') keep = true;
    else throw new Error(`unknown option ${arg} (--peers, --compare, --warmup, --count)`);
  }
  // Every saved build given is counted too, under its peers' names (gate-mux-ref, gate-mux-peered-ref, ...).
  for (const peer of comparePeers(compare)) if (!peers.includes(peer.name)) peers.push(peer.name);
  return { peers, compare, warmup, count, keep };
}

function log(message: string): void {
  process.stderr.write(`[instructions] ${message}\n`);
}

/**
 * What a process of a router is, from the command line callgrind recorded: the tunnelled routers
 * are several processes (the proxy, the holder proxy of a peered route, the agent), each a bench
 * script; other routers are one process, named by their program.
 */
function processRole(cmd: string): string {
  const script = /\/bench\/([\w-]+)\.js\b/.exec(cmd)?.[1];
  if (script === 'peer-holder') return 'holder';
  if (script === 'tunnel-agent') return 'agent';
  if (script !== undefined) return 'proxy';
  return /([\w-]+)(?:\s|$)/.exec(cmd.split('/').pop() ?? cmd)?.[1] ?? 'router';
}

/**
 * The `summary:` totals of the callgrind dumps `<prefix>.<pid>.1` (one per process, children
 * traced), by process role (processRole); `total` is their sum.
 */
function dumpedInstructions(dir: string): Map<string, number> {
  const byRole = new Map<string, number>([['total', 0]]);
  for (const name of readdirSync(dir)) {
    if (!/^cg\.\d+\.1$/.test(name)) continue;
    const text = readFileSync(join(dir, name), 'utf8');
    const match = /^summary: (\d+)$/m.exec(text);
    if (!match) continue;
    const role = processRole(/^cmd: (.*)$/m.exec(text)?.[1] ?? '');
    byRole.set(role, (byRole.get(role) ?? 0) + Number(match[1]));
    byRole.set('total', byRole.get('total')! + Number(match[1]));
  }
  return byRole;
}

async function runLoad(port: number, connections: number, dir: string): Promise<{ connections: number; failed: number }> {
  const child = spawnPinned(process.execPath, [join(distDir, 'bench', 'load.js')], {
    cpus: undefined,
    env: {
      LOAD_MODE: 'rate',
      PORT: String(port),
      COUNT: String(connections),
      CONCURRENCY: '8',
      DURATION_MS: '900000',
      HARD_TIMEOUT_MS: '960000',
    },
    log: join(dir, 'load.log'),
    stdout: 'pipe',
  });
  try {
    return await new JsonLines(child).next<{ connections: number; failed: number }>(960_000);
  } finally {
    await stopChild(child);
  }
}

/**
 * Zeroes (-z) or dumps (-d) the counters of the router's processes only: `pid` (valgrind runs the
 * router in place of its process) and every process below it (the traced holder and agent).
 * Without a pid callgrind_control acts on every callgrind run of this user, and a second
 * instruction count running meanwhile would have its counters zeroed or dumped early.
 */
function callgrindControl(flag: '-z' | '-d', pid: number): void {
  for (const p of [pid, ...descendants(pid)]) {
    try {
      execFileSync('callgrind_control', [flag, String(p)], { stdio: 'ignore' });
    } catch {
      // not a callgrind process (a process without valgrind below it), or gone
    }
  }
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
        rows.push([peer.name, 'missing', peer.missing, '', '']);
        continue;
      }
      const runDir = mkdtempSync(join(dir, `${peer.name}-`));
      const ctx: PeerContext = {
        dir: runDir,
        distDir,
        upstreamA: ports.portA,
        upstreamB: ports.portB,
        cpus: undefined,
        env: { BENCH_AGENT_WAIT_MS: '600000' },
        wrap: {
          // JIT code is written at run time: callgrind must re-read code it already translated.
          // Children traced: a tunnelled router's holder proxy and agent are processes of the path.
          command: [
            'valgrind',
            '--tool=callgrind',
            '--smc-check=all-non-file',
            '--trace-children=yes',
            `--callgrind-out-file=${join(runDir, 'cg.%p')}`,
          ],
          // The tunnelled routers sign their certificates (node-forge, JavaScript) under callgrind first.
          startTimeoutMs: 900_000,
        },
      };
      log(`${peer.name}: starting under callgrind`);
      const running = await peer.start(ctx);
      try {
        const warm = await runLoad(running.port, args.warmup, dir);
        callgrindControl('-z', running.pid!);
        const measured = await runLoad(running.port, args.count, dir);
        callgrindControl('-d', running.pid!);
        const n = Math.max(1, measured.connections);
        const byRole = dumpedInstructions(runDir);
        const perConnection = byRole.get('total')! / n;
        const roles = [...byRole].filter(([role]) => role !== 'total');
        const split =
          roles.length > 1 ? roles.map(([role, count]) => `${role} ${Math.round(count / n).toLocaleString('en-US')}`).join(', ') : '';
        log(
          `${peer.name}: ${Math.round(perConnection).toLocaleString('en-US')} instructions per connection${split ? ` (${split})` : ''} (${warm.connections} warm-up, ${measured.connections} measured, ${warm.failed + measured.failed} failed)`,
        );
        rows.push([
          peer.name,
          Math.round(perConnection).toLocaleString('en-US'),
          split || '—',
          String(measured.connections),
          String(warm.failed + measured.failed),
        ]);
      } finally {
        await running.stop();
      }
    }
  } finally {
    await stopChild(upstreams);
    if (args.keep) log(`callgrind files kept in ${dir} (callgrind_annotate <file>)`);
    else rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(
    `\nUser-space instructions per routed connection (callgrind; ${args.warmup} warm-up connections, then ${args.count} measured, 8 concurrent TLS handshakes)\n\n`,
  );
  process.stdout.write(`${markdownTable(['router', 'instructions/conn', 'by process', 'connections', 'failed'], rows)}\n`);
}

await main();
