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
//
// The options are read in bench/options.ts, each workload is a function of bench/workloads/, the
// report (markdown, JSON, SVG charts) is written by bench/report.ts.
import { rmSync } from 'node:fs';
import { parseBenchOptions, USAGE, type Workload } from './options.js';
import { writeResults } from './report.js';
import { openSession, type BenchSession } from './session.js';
import { bulk } from './workloads/bulk.js';
import { idle } from './workloads/idle.js';
import { parser } from './workloads/parser.js';
import { rate } from './workloads/rate.js';
import { tunnel } from './workloads/tunnel.js';
import { workers } from './workloads/workers.js';

/** The workloads in the order a run takes them. */
const RUN_ORDER: Array<[Workload, (s: BenchSession) => Promise<void>]> = [
  ['parser', parser],
  ['bulk', bulk],
  ['rate', rate],
  ['idle', idle],
  ['workers', workers],
  ['tunnel', tunnel],
];

let options: ReturnType<typeof parseBenchOptions>;
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`bench: ${(err as Error).message}\n${USAGE}`);
  process.exit(2);
}
if (options === 'help') {
  process.stdout.write(USAGE);
  process.exit(0);
}
const session = openSession(options);
const startedAt = new Date();
session.log(`temp dir ${session.dir}; peers: ${session.peers.map((p) => (p.missing ? `${p.name} (${p.missing})` : p.name)).join(', ')}`);
try {
  for (const [name, workload] of RUN_ORDER) if (options.only.has(name)) await workload(session);
} finally {
  writeResults(session, startedAt, (Date.now() - startedAt.getTime()) / 1000);
  if (!options.keep) rmSync(session.dir, { recursive: true, force: true });
}
