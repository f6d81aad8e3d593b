// Stream setup over an established tunnel: the time from the proxy's CONNECT to the
// agent's 200, for new streams opened one after another on a quiet tunnel. The proxy side runs in
// this process (pinned by the runner like a router), the agent in its own (AGENT_CPUS); each
// stream asks for TARGET, which the agent dials, and is let go (END_STREAM) and closed before the
// next one opens. WARMUP streams first, unmeasured; then COUNT measured. One JSON line on stdout:
// {"count":..,"p50Ms":..,"p99Ms":..,"meanMs":..}.
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { releaseTunnelStream } from '../lib/tunnel/tunnel-stream.js';
import { BENCH_AGENT, startTunnelSide } from './tunnel-side.js';
import { median } from './stats.js';

const target = process.env.TARGET ?? '';
const count = Math.max(1, Math.min(100_000, Number(process.env.COUNT ?? 300) || 300));
const warmup = Math.max(0, Math.min(10_000, Number(process.env.WARMUP ?? 30) || 0));

const side = await startTunnelSide(target);
const times: number[] = [];
try {
  for (let i = 0; i < warmup + count; i++) {
    const started = performance.now();
    const stream = await side.registry.open(BENCH_AGENT, target, { timeoutMs: 10_000 });
    const took = performance.now() - started;
    if (i >= warmup) times.push(took);
    const closed = once(stream, 'close');
    releaseTunnelStream(stream);
    await closed;
  }
} finally {
  await side.close();
}
const sorted = [...times].sort((a, b) => a - b);
const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
process.stdout.write(
  `${JSON.stringify({ count: times.length, p50Ms: median(times), p99Ms: at(0.99), meanMs: times.reduce((a, b) => a + b, 0) / times.length })}\n`,
);
process.exit(0);
