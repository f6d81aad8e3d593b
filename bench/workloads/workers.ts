// Workers: gate-mux on every core (node:cluster, shared socket or round-robin) against one
// process, bulk and rate, with nothing pinned: the point is to let the router use both cores.
import { sample } from '../proc.js';
import { type BenchSession, rotate, runLoad, startUpstreams, withPeer } from '../session.js';
import { fmt } from '../stats.js';
import { measureRate } from './rate.js';

const WORKER_VARIANTS = [
  { variant: '1 (single process)', env: {} as Record<string, string> },
  { variant: '2 (cluster, shared socket)', env: { WORKERS: '2' } },
  { variant: '2 (cluster, round-robin)', env: { WORKERS: '2', CLUSTER_SCHEDULING: 'round-robin' } },
];

/** The variants a run measures (a smoke run leaves out round-robin). */
export function workerVariants(s: BenchSession): typeof WORKER_VARIANTS {
  return s.options.quick ? WORKER_VARIANTS.slice(0, 2) : WORKER_VARIANTS;
}

export async function workers(s: BenchSession): Promise<void> {
  const { config } = s;
  const gate = s.runnable.find((p) => p.name === 'gate-mux');
  if (!gate) return;
  const variants = workerVariants(s);
  for (const [mode, env] of [
    ['bulk', { BULK_BYTES: String(config.workersBulkBytes) }],
    ['rate', {}],
  ] as const) {
    const up = await startUpstreams(s, mode, env, undefined);
    try {
      for (let round = 1; round <= config.workersRounds; round++) {
        for (const v of rotate(variants, round - 1)) {
          // No --node-args / --profile here: the routers run as a deployment would.
          const ctx = { dir: s.dir, distDir: s.distDir, upstreamA: up.portA, upstreamB: up.portB, cpus: undefined, env: v.env };
          await withPeer(
            s,
            'workers',
            round,
            gate,
            ctx,
            async (running, m) => {
              m.derived.kind = mode === 'bulk' ? 0 : 1;
              if (mode === 'bulk') {
                const before = sample(running.pid!);
                const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean }>(
                  s,
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
                s.log(`workers bulk r${round} ${v.variant}: ${fmt(load.mbPerSecond)} MB/s, ${fmt(m.derived.cpuSecondsPerGB, 2)} CPU s/GB`);
              } else {
                const load = await measureRate(s, running, m, config.workersRateMs, undefined);
                s.log(
                  `workers rate r${round} ${v.variant}: ${fmt(load.perSecond)} conn/s, ${fmt(m.derived.cpuMicrosPerConnection)} µs/conn`,
                );
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
