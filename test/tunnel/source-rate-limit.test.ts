// The per-source token bucket behind the join and renewal limits: a burst, a steady refill, and a
// bounded map whatever the number of distinct sources.
import t from 'tap';
import { SourceRateLimiter } from '../../lib/tunnel/source-rate-limit.js';

t.test('a burst, then the refill rate; sources are counted apart', async (t) => {
  const limiter = new SourceRateLimiter({ burst: 3, perMinute: 60 });
  const now = 1_000_000;
  t.same(
    [1, 2, 3, 4].map(() => limiter.take('10.0.0.1', now)),
    [true, true, true, false],
    'three at once, not four',
  );
  t.equal(limiter.retryAfterMs('10.0.0.1', now), 1000, 'one token a second');
  t.ok(limiter.take('10.0.0.2', now), 'another source has its own bucket');
  t.notOk(limiter.take('10.0.0.1', now + 999), 'not before the token is back');
  t.ok(limiter.take('10.0.0.1', now + 2000), 'back after a second');
  limiter.setLimit({ burst: 3, perMinute: 0 });
  t.notOk(
    limiter.take('10.0.0.2', now + 60_000) && limiter.take('10.0.0.2', now + 60_000) && limiter.take('10.0.0.2', now + 60_000),
    'per_minute 0: the burst is all there is',
  );
});

t.test('the map stays bounded under many distinct sources', async (t) => {
  const limiter = new SourceRateLimiter({ burst: 2, perMinute: 60 }, 100);
  for (let i = 0; i < 10_000; i++) limiter.take(`10.0.${i >> 8}.${i & 255}`, 5_000);
  t.ok(limiter.size <= 100, `at most 100 sources kept (${limiter.size})`);
  t.ok(limiter.take('192.0.2.1', 5_000), 'a new source is still served');
});
