// Connection rate: `rateConcurrency` clients making full TLS handshakes through each router for
// `rateMs` (after an unmeasured warm-up); connections per second, time to first byte, and the
// router's CPU per connection.
import type { RunningPeer } from '../peers.js';
import { processLabel, sample } from '../proc.js';
import { type BenchSession, type Measurement, peerContext, rotate, runLoad, startUpstreams, withPeer } from '../session.js';
import { fmt } from '../stats.js';

interface RateLoad {
  connections: number;
  failed: number;
  misrouted: number;
  perSecond: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
}

/** One measured rate round against `running` (also the workers workload's rate half). */
export async function measureRate(
  s: BenchSession,
  running: RunningPeer,
  m: Measurement,
  durationMs: number,
  cpus: string | undefined,
): Promise<RateLoad> {
  const before = running.pid ? sample(running.pid) : undefined;
  const load = await runLoad<RateLoad>(
    s,
    'rate',
    running.port,
    { CONCURRENCY: String(s.config.rateConcurrency), DURATION_MS: String(durationMs) },
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
    // Each process of a path (proxy, holder, agent) on its own, to see which one a cost is in.
    if (after.pids.length > 1) {
      m.cpuByProcess = {};
      for (const pid of after.pids) {
        const seconds = (after.cpuSecondsByPid[pid] ?? 0) - (before.cpuSecondsByPid[pid] ?? 0);
        m.cpuByProcess[processLabel(pid)] = (seconds * 1e6) / Math.max(1, load.connections);
      }
    }
  }
  return load;
}

function byProcess(cpu: Record<string, number>): string {
  return Object.entries(cpu)
    .map(([label, micros]) => `${label} ${fmt(micros)}`)
    .join(', ');
}

export async function rate(s: BenchSession): Promise<void> {
  const { config } = s;
  const up = await startUpstreams(s, 'rate');
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(s.passthrough, round - 1)) {
        await withPeer(s, 'rate', round, peer, peerContext(s, up), async (running, m) => {
          if (config.rateWarmupMs > 0) {
            await runLoad(
              s,
              'rate',
              running.port,
              { CONCURRENCY: String(config.rateConcurrency), DURATION_MS: String(config.rateWarmupMs) },
              config.rateWarmupMs + 30_000,
            );
          }
          const load = await measureRate(s, running, m, config.rateMs, s.clientCpus);
          s.log(
            `rate r${round} ${peer.name}: ${fmt(load.perSecond)} conn/s, ttfb p50 ${fmt(load.ttfbP50Ms, 2)} ms` +
              `${m.derived.cpuMicrosPerConnection !== undefined ? `, ${fmt(m.derived.cpuMicrosPerConnection)} µs/conn (sys ${fmt(m.derived.systemMicrosPerConnection)}${m.cpuByProcess ? `; ${byProcess(m.cpuByProcess)}` : ''})` : ''}` +
              `${load.failed ? `, ${load.failed} failed` : ''}${load.misrouted ? `, ${load.misrouted} misrouted` : ''}`,
          );
        });
      }
    }
  } finally {
    await up.stop();
  }
}
