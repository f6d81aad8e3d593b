/**
 * The fuzz loop: round-robin over the targets, each input a mutation of a corpus entry (or, one
 * time in ten, random bytes behind a plausible first byte). Inputs that a parser accepts join
 * that target's corpus (bounded), so mutations build on valid structure. Deterministic per seed.
 */
import { prng } from '../helpers/prng.js';
import { mutate } from './mutate.js';
import { corpus, runTarget, type Target } from './targets.js';

export interface FuzzOptions {
  inputs: number;
  seed: number;
  /** An input taking longer than this is a failure (a hang in the making). */
  slowMs?: number;
  /** Called every `progressEvery` inputs. */
  onProgress?: (done: number) => void;
  progressEvery?: number;
}

export interface FuzzFailureReport {
  target: Target;
  index: number;
  input: string;
  error: string;
}

export interface FuzzReport {
  inputs: number;
  seconds: number;
  inputsPerSecond: number;
  maxRssMiB: number;
  slowestMs: number;
  verdicts: Record<Target, Record<string, number>>;
  failures: FuzzFailureReport[];
}

const TARGETS: Target[] = ['client-hello', 'greeting', 'proxy-header', 'detector', 'tunnel-frames'];
const CORPUS_LIMIT = 2000;
const FIRST_BYTES = [0x16, 0x50, 0x0d, 0x53, 0x47, 0x50, 0x00];

export async function fuzz(options: FuzzOptions): Promise<FuzzReport> {
  const rand = prng(options.seed);
  const seeds = corpus();
  const pools: Record<Target, Buffer[]> = {
    'client-hello': [...seeds['client-hello']],
    greeting: [...seeds.greeting],
    'proxy-header': [...seeds['proxy-header']],
    detector: [...seeds.detector],
    'tunnel-frames': [...seeds['tunnel-frames']],
  };
  const verdicts = Object.fromEntries(TARGETS.map((t) => [t, {}])) as Record<Target, Record<string, number>>;
  const failures: FuzzFailureReport[] = [];
  const slowMs = options.slowMs ?? 100;
  let slowest = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < options.inputs; i++) {
    const target = TARGETS[i % TARGETS.length]!;
    const pool = pools[target];
    const input = rand.chance(0.1)
      ? Buffer.concat([Buffer.from([rand.pick(FIRST_BYTES)]), rand.bytes(rand.int(2048))])
      : mutate(rand.pick(pool), pool, rand);
    const t0 = process.hrtime.bigint();
    let verdict: string;
    try {
      verdict = runTarget(target, input, rand);
    } catch (err) {
      failures.push({
        target,
        index: i,
        input: input.toString('hex'),
        error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
      });
      verdict = 'FAILED';
    }
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (ms > slowest) slowest = ms;
    if (ms > slowMs) failures.push({ target, index: i, input: input.toString('hex'), error: `took ${ms.toFixed(1)} ms` });
    verdicts[target][verdict] = (verdicts[target][verdict] ?? 0) + 1;
    // Keep accepted inputs, favouring rare verdicts so one easy outcome does not take the pool over.
    const rare = verdicts[target][verdict]! * TARGETS.length * 10 < i + 100;
    if ((verdict === 'done' || verdict.startsWith('done:') || verdict.startsWith('match:')) && rand.chance(rare ? 0.2 : 0.01)) {
      if (pool.length < CORPUS_LIMIT) pool.push(input);
      else pool[seeds[target].length + rand.int(CORPUS_LIMIT - seeds[target].length)] = input;
    }
    if (options.onProgress && i > 0 && i % (options.progressEvery ?? 100_000) === 0) options.onProgress(i);
    // A turn of the event loop now and then: what a target left scheduled (a framed session's
    // gathered write, a closed socket's events) runs and lets go of its memory.
    if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve));
    if (failures.length >= 20) break;
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const inputs = Object.values(verdicts).reduce((a, v) => a + Object.values(v).reduce((x, y) => x + y, 0), 0);
  return {
    inputs,
    seconds,
    inputsPerSecond: Math.round(inputs / seconds),
    maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    slowestMs: Math.round(slowest * 100) / 100,
    verdicts,
    failures,
  };
}
