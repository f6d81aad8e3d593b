// bench/stream-floor.ts, run small: the three exchanges complete (every byte of every turn arrives,
// or the run fails), and it prints a row per exchange with a figure.
import t from 'tap';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'stream-floor.js');

t.test('a CONNECT stream, a framed stream and a TCP connection, both ends measured', async (t) => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [script, '--streams', '40', '--warmup', '10', '--concurrency', '4', '--turns', '2'],
    {
      timeout: 60_000,
    },
  );
  t.match(stdout, /40 exchanges of 2 turns/);
  const rows = stdout.split('\n').filter((line) => line.startsWith('| a '));
  t.equal(rows.length, 3, 'one row per exchange');
  for (const row of rows) {
    const cpu = Number(row.split('|')[2]);
    t.ok(cpu > 0, `a CPU figure: ${row}`);
  }
});
