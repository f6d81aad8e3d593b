// Bulk: one TLS connection through each router (the client's TLS passed through), the upstream
// sending `bulkBytes`; throughput, and the router's CPU per GB.
import { type BenchSession, peerContext, rotate, runLoad, startUpstreams, withPeer } from '../session.js';
import { sample } from '../proc.js';
import { fmt } from '../stats.js';

export async function bulk(s: BenchSession): Promise<void> {
  const { config } = s;
  const up = await startUpstreams(s, 'bulk', { BULK_BYTES: String(config.bulkBytes) });
  try {
    for (let round = 1; round <= config.rounds; round++) {
      for (const peer of rotate(s.passthrough, round - 1)) {
        await withPeer(s, 'bulk', round, peer, peerContext(s, up), async (running, m) => {
          const before = running.pid ? sample(running.pid) : undefined;
          const load = await runLoad<{ bytes: number; mbPerSecond: number; complete: boolean; misrouted: number }>(
            s,
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
          s.log(
            `bulk r${round} ${peer.name}: ${fmt(load.mbPerSecond)} MB/s${m.cpuSeconds !== undefined ? `, ${fmt(m.derived.cpuSecondsPerGB, 2)} CPU s/GB (sys ${fmt(m.derived.systemSecondsPerGB, 2)})` : ''}`,
          );
        });
      }
    }
  } finally {
    await up.stop();
  }
}
