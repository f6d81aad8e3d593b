// bench/tunnel-floor.ts, run small: the ten routes (five on Node's API alone, three through
// gate-mux's bench routers, two of gate-mux's relays on the tunnel framing) carry every byte of every connection (a missing byte or a child that
// dies fails the run), and each prints its CPU with one figure per process it counts: the
// forwarder alone; the proxy and the agent for a local tunnel; the proxy, the holder and the agent
// through a peer.
import t from 'tap';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'tunnel-floor.js');

t.test('forward, local tunnel and peered, on Node alone and through gate-mux, every process counted', async (t) => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [script, '--connections', '30', '--warmup', '5', '--concurrency', '4', '--turns', '2'],
    { timeout: 60_000 },
  );
  t.match(stdout, /30 connections of 2 turns/);
  const rows = stdout.split('\n').filter((line) => /^\| (Node|gate-mux)('s relays on the tunnel framing)?: /.test(line));
  t.same(
    rows.map((row) => row.split('|')[3]!.split('+').length),
    [1, 2, 2, 3, 3, 1, 2, 3, 2, 3],
    'the forwarder; the proxy and the agent; the proxy, the holder and the agent',
  );
  // gate-mux's processes are read from /proc: to the microsecond where the kernel has the
  // scheduler's debug files, else in 10 ms ticks, which a run this small may not reach.
  const fine = existsSync('/proc/self/sched');
  for (const row of rows) {
    const figures = row.split('|')[3]!.split('+').map(Number);
    if (fine || row.startsWith('| Node') || row.includes('tunnel framing'))
      t.ok(
        figures.every((us) => us > 0),
        `every process's CPU counted: ${row}`,
      );
    else
      t.ok(
        figures.every((us) => us >= 0),
        `a figure per process (in ticks here): ${row}`,
      );
  }
});
