// `npm run bench`'s command line (node:util parseArgs, strict: an unknown option is an error that
// names it) and the sizes of a run that follow from it (full or --quick).
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

export const WORKLOADS = ['bulk', 'rate', 'idle', 'parser', 'workers', 'tunnel'] as const;
export type Workload = (typeof WORKLOADS)[number];

export const USAGE =
  'npm run bench -- [--quick] [--only bulk,rate,idle,parser,workers,tunnel] [--peers direct,gate-mux,...] [--rounds N] [--keep] [--profile DIR] [--compare OTHER/dist/bench/router.js[,...]] [--node-args "--flag ..."] [--ref-node-args "--flag ..."] [--no-warmup]\n';

export interface BenchOptions {
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
}

/** Options whose value is itself a list of node flags, so it starts with a dash. */
const FLAG_VALUED = new Set(['--node-args', '--ref-node-args']);

/** The options of `argv` (without node and the script), or 'help' for `--help` / `-h`. */
export function parseBenchOptions(argv: string[]): BenchOptions | 'help' {
  // parseArgs refuses `--node-args --max-semi-space-size=2` as ambiguous (a value that looks like an
  // option); BENCHMARKS.md's commands write it so, so those two take the next word as written.
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (FLAG_VALUED.has(arg) && i + 1 < argv.length) args.push(`${arg}=${argv[++i]}`);
    else args.push(arg);
  }
  const { values } = parseArgs({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: 'boolean' },
      keep: { type: 'boolean' },
      'no-warmup': { type: 'boolean' },
      only: { type: 'string' },
      rounds: { type: 'string' },
      profile: { type: 'string' },
      compare: { type: 'string' },
      'ref-node-args': { type: 'string' },
      'node-args': { type: 'string', multiple: true },
      peers: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const list = (value: string): string[] => value.split(',').map((s) => s.trim());
  let only = new Set<Workload>(WORKLOADS);
  if (values.only !== undefined) {
    const names = list(values.only);
    for (const n of names)
      if (!(WORKLOADS as readonly string[]).includes(n)) throw new Error(`unknown workload ${n} (${WORKLOADS.join(', ')})`);
    only = new Set(names as Workload[]);
  }
  const words = (value: string): string[] => value.split(' ').filter(Boolean);
  return {
    quick: values.quick ?? false,
    only,
    rounds: values.rounds === undefined ? undefined : Math.max(1, Math.min(20, Number(values.rounds) || 1)),
    peers: values.peers === undefined ? undefined : list(values.peers),
    keep: values.keep ?? false,
    profile: values.profile === undefined ? undefined : resolve(values.profile),
    compare: values.compare === undefined ? [] : list(values.compare).map((p) => resolve(p)),
    nodeArgs: (values['node-args'] ?? []).flatMap(words),
    refNodeArgs: values['ref-node-args'] === undefined ? undefined : words(values['ref-node-args']),
    warmup: !values['no-warmup'],
  };
}

export interface BenchConfig {
  rounds: number;
  bulkBytes: number;
  rateMs: number;
  /** Unmeasured connections before the measured rate round (every peer alike): steady state, not JIT warm-up. */
  rateWarmupMs: number;
  rateConcurrency: number;
  idleCount: number;
  idleRounds: number;
  parserMs: number;
  workersBulkBytes: number;
  workersRateMs: number;
  workersRounds: number;
  /** Bytes moved through the terminate routes (direct and tunnelled), to compare the tunnel's cost. */
  tunnelBytes: number;
  /** New streams per round whose CONNECT -> 200 is timed, after `tunnelSetupWarmup` unmeasured. */
  tunnelSetupCount: number;
  tunnelSetupWarmup: number;
}

/** The sizes of a full run, or of a smoke run (`--quick`); `--rounds` overrides every round count. */
export function benchConfig(options: BenchOptions): BenchConfig {
  const quick = options.quick;
  return {
    rounds: options.rounds ?? (quick ? 1 : 3),
    bulkBytes: quick ? 256 * 2 ** 20 : 2 ** 30,
    rateMs: quick ? 1200 : 4000,
    rateWarmupMs: options.warmup ? (quick ? 500 : 1500) : 0,
    rateConcurrency: 64,
    idleCount: quick ? 500 : 5000,
    idleRounds: options.rounds ?? (quick ? 1 : 2),
    parserMs: quick ? 150 : 700,
    workersBulkBytes: quick ? 128 * 2 ** 20 : 512 * 2 ** 20,
    workersRateMs: quick ? 1500 : 3000,
    workersRounds: options.rounds ?? (quick ? 1 : 2),
    tunnelBytes: quick ? 128 * 2 ** 20 : 512 * 2 ** 20,
    tunnelSetupCount: quick ? 100 : 300,
    tunnelSetupWarmup: 30,
  };
}
