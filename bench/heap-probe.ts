// A preload for the idle workload's Node routers (`node --expose-gc --import heap-probe.js`):
// on SIGUSR2 it runs a full garbage collection and writes process.memoryUsage() as JSON to
// heapProbeFile(pid). RSS per idle connection moves by a kibibyte or more between identical runs
// with when V8 last collected (garbage promoted by the accept burst stays in the old generation
// until a mark-compact runs); the live heap after a full collection is what the connections
// really hold, and repeats. It imports nothing from gate-mux, so it measures any saved build
// (`--compare`) the same way.
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface HeapProbe {
  /** V8 heap in use after the collection, bytes. */
  heapUsed: number;
  /** Memory outside the V8 heap that JavaScript objects hold (Buffers, native wrappers), bytes. */
  external: number;
  rss: number;
}

export function heapProbeFile(pid: number): string {
  return join(tmpdir(), `gate-mux-heap-probe-${pid}.json`);
}

const collect = (globalThis as { gc?: (options?: { type: 'major'; execution: 'sync' }) => void }).gc;
// Loaded as a preload: only then is there a signal to answer (importing it for heapProbeFile is inert).
if (process.execArgv.some((a) => a.endsWith('heap-probe.js')) && collect) {
  process.on('SIGUSR2', () => {
    // Twice: the first collection's finalizers and weak callbacks free more for the second.
    collect();
    collect();
    const { heapUsed, external, rss } = process.memoryUsage();
    writeFileSync(heapProbeFile(process.pid), JSON.stringify({ heapUsed, external, rss } satisfies HeapProbe));
  });
}
