// bench/tunnel-floor.ts, run small: the five routes carry every byte of every connection (a
// missing byte or a child that dies fails the run), and each prints its CPU with one figure per
// process it counts: the forwarder alone; the proxy and the agent for a local tunnel; the proxy,
// the holder and the agent through a peer.
import t from 'tap';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'tunnel-floor.js');

t.test('forward, and the local and peered tunnels on HTTP/2 and on the lean framing, every process counted', async (t) => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [script, '--connections', '30', '--warmup', '5', '--concurrency', '4', '--turns', '2'],
    { timeout: 60_000 },
  );
  t.match(stdout, /30 connections of 2 turns/);
  const rows = stdout.split('\n').filter((line) => /^\| (forward|local|peered)/.test(line));
  t.same(
    rows.map((row) => row.split('|')[3]!.split('+').length),
    [1, 2, 2, 3, 3],
    'the forwarder; the proxy and the agent; the proxy, the holder and the agent',
  );
  for (const row of rows) t.ok(Number(row.split('|')[2]) > 0, `a CPU figure: ${row}`);
});
