import t from 'tap';
import { LogLimiter } from '../lib/log-limiter.js';
import { captureLogs } from './hardening/log-capture.js';
import { liveHandles } from './helpers/net.js';

t.test('the first lines of a code are logged one by one, the rest once with their exact count', async (t) => {
  const { logger, lines } = captureLogs();
  const limiter = new LogLimiter(logger, { burst: 3, intervalMs: 60_000 });
  for (let i = 0; i < 1000; i++) limiter.log('warn', 'GATE_ERR_A', { code: 'GATE_ERR_A', i }, 'a failed');
  limiter.log('info', 'GATE_ERR_B', { code: 'GATE_ERR_B' }, 'b refused');
  t.equal(lines.length, 4, 'three of A and the first of B, nothing else yet');
  t.same(
    lines.map((l) => l.i),
    [0, 1, 2, undefined],
  );
  limiter.flush();
  t.equal(lines.length, 5, 'one summary line for A; none for B, which held nothing back');
  t.match(lines[4], { level: 40, code: 'GATE_ERR_A', suppressed: 997, logged: 3 });
  t.equal(liveHandles().timers, 0, 'no timer keeps the process alive');
  limiter.log('warn', 'GATE_ERR_A', { code: 'GATE_ERR_A', i: 1000 }, 'a failed');
  t.equal(lines.length, 6, 'a new interval: A gets its own line again');
});

t.test('the interval summarises by itself, and a code quiet for an interval starts afresh', async (t) => {
  const { logger, lines } = captureLogs();
  const limiter = new LogLimiter(logger, { burst: 1, intervalMs: 50 });
  for (let i = 0; i < 5; i++) limiter.log('warn', 'GATE_ERR_A', { code: 'GATE_ERR_A' }, 'a');
  for (let i = 0; i < 100 && lines.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.match(lines[1], { code: 'GATE_ERR_A', suppressed: 4 }, 'summary after the interval, without a close');
  limiter.log('warn', 'GATE_ERR_B', { code: 'GATE_ERR_B' }, 'b');
  await new Promise((r) => setTimeout(r, 60));
  limiter.log('warn', 'GATE_ERR_B', { code: 'GATE_ERR_B' }, 'b');
  t.equal(
    lines.filter((l) => l.code === 'GATE_ERR_B' && l.suppressed === undefined).length,
    2,
    'B seen again after a quiet interval: its own line',
  );
  limiter.flush();
});
