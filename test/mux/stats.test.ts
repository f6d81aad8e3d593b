import t from 'tap';
import { DETECT_MS_BOUNDS, Stats } from '../../lib/mux/stats.js';

t.test('detection times land in the first bucket whose bound they do not exceed', async (t) => {
  const stats = new Stats();
  for (const ms of [0.2, 1, 1.01, 9.9, 10_000, 10_001, 60_000]) stats.detectTime(ms);
  const { detectMs } = stats.snapshot();
  t.equal(detectMs.count, 7);
  t.equal(Math.round(detectMs.sum * 100) / 100, 80_013.11);
  t.same(detectMs.histogram, { '1': 2, '2.5': 1, '10': 1, '10000': 1, '+Inf': 2 }, 'a bound is inclusive; beyond the last one is +Inf');
  t.equal(DETECT_MS_BOUNDS[DETECT_MS_BOUNDS.length - 1], 10_000, 'the last bound is the default detection deadline');
});
