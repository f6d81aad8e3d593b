// Idle: `idleCount` established TLS connections held open through each router, then closed; memory
// and descriptors per connection (and, for the Node routers, live heap after a full GC), and how
// much of it comes back after the close.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { heapProbeFile, type HeapProbe } from '../heap-probe.js';
import type { Peer } from '../peers.js';
import { sample } from '../proc.js';
import { type BenchSession, peerContext, rotate, startUpstreams, withPeer } from '../session.js';
import { JsonLines, spawnPinned, stopChild } from '../spawn.js';
import { fmt } from '../stats.js';

/**
 * The tunnelled routes are not run idle: 5,000 idle clients are 5,000 streams in one tunnel, over
 * the session's 1,000-stream limit (lib/tunnel/settings.ts); nor is "direct" (no router to measure).
 */
export function runsIdle(peer: Peer): boolean {
  return peer.name !== 'direct' && peer.name !== 'gate-mux-local-tunnel' && peer.name !== 'gate-mux-peered';
}

/**
 * Half-second polls for memory and descriptors to come back after the idle connections close.
 * V8 gives freed heap back in a memory-reducing GC once the process has gone quiet, 8-20 s
 * after the last connections closed (its memory reducer waits --gc-memory-reducer-start-delay-ms,
 * 8 s by default, then for the mutator to be idle), so the wait is long enough to see it; a
 * router that returns at once is done after the first poll.
 */
function returnPolls(s: BenchSession): number {
  return s.options.quick ? 4 : 60;
}

export async function idle(s: BenchSession): Promise<void> {
  const { config } = s;
  const up = await startUpstreams(s, 'idle');
  try {
    for (let round = 1; round <= config.idleRounds; round++) {
      for (const peer of rotate(s.passthrough.filter(runsIdle), round - 1)) {
        // The Node routers answer a heap probe (bench/heap-probe.ts): live heap after a full GC.
        // Not a saved build given its own node flags (--ref-node-args replace these): without the
        // preload, SIGUSR2 would end it.
        const probed = peer.name.startsWith('gate-mux') && !(s.options.refNodeArgs && peer.name.startsWith('gate-mux-ref'));
        const nodeArgs = [
          ...(s.profiling.nodeArgs ?? []),
          ...(probed ? ['--expose-gc', '--import', join(s.distDir, 'bench', 'heap-probe.js')] : []),
        ];
        await withPeer(s, 'idle', round, peer, peerContext(s, up, { nodeArgs }), async (running, m) => {
          const pid = running.pid!;
          await sleep(300);
          const before = sample(pid);
          const heapBefore = probed ? await probeHeap(pid) : undefined;
          const child = spawnPinned(process.execPath, [join(s.distDir, 'bench', 'load.js')], {
            cpus: s.clientCpus,
            env: { LOAD_MODE: 'idle', PORT: String(running.port), COUNT: String(config.idleCount), HARD_TIMEOUT_MS: '180000' },
            log: join(s.dir, 'load.log'),
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
            for (let i = 0; i < returnPolls(s); i++) {
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
            s.log(
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
