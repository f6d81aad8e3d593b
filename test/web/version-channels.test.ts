import t from 'tap';
import { VersionChannels, type FetchText } from '../../lib/web/version-channels.js';

/** A fake upstream that counts its hits and answers from a queue (last answer repeats). */
function fakeFetch(answers: Array<{ status: number; body: string } | Error>) {
  const calls: Array<{ url: string; timeoutMs: number }> = [];
  const fetchText: FetchText = async (url, { timeoutMs }) => {
    calls.push({ url, timeoutMs });
    const answer = answers[Math.min(calls.length - 1, answers.length - 1)];
    if (answer instanceof Error) throw answer;
    if (!answer) throw new Error('no answer');
    return answer;
  };
  return { fetchText, calls };
}

t.test('default serves the proxy version unless configured; static channels', async (t) => {
  const channels = new VersionChannels({ channels: { 'stable/cloud': { kind: 'static', version: 'v1.2.3' } }, proxyVersion: '0.1.0' });
  t.equal(await channels.version('default'), 'v0.1.0');
  t.equal(await channels.version('stable/cloud'), 'v1.2.3');
  t.same(channels.names().sort(), ['default', 'stable/cloud']);
  const overridden = new VersionChannels({ channels: { default: { kind: 'static', version: 'v2.0.0' } }, proxyVersion: 'v0.1.0' });
  t.equal(await overridden.version('default'), 'v2.0.0');
});

t.test('unknown and invalid names have their own codes', async (t) => {
  const channels = new VersionChannels({ channels: {}, proxyVersion: '0.1.0' });
  await t.rejects(channels.version('nope'), { code: 'GATE_ERR_CHANNEL_NOT_FOUND' });
  await t.rejects(channels.version('../x'), { code: 'GATE_ERR_CHANNEL_NAME_INVALID' });
});

t.test('construction checks', async (t) => {
  t.throws(() => new VersionChannels({ channels: {}, proxyVersion: 'dev' }), { code: 'GATE_ERR_CONFIG_INVALID' });
  t.throws(
    () => new VersionChannels({ channels: { edge: { kind: 'forward', url: 'https://u:secret@x.example.com' } }, proxyVersion: '1.0.0' }),
    { code: 'GATE_ERR_CONFIG_INVALID', message: /no fetchText/ },
  );
  try {
    new VersionChannels({ channels: { edge: { kind: 'forward', url: 'https://u:secret@x.example.com' } }, proxyVersion: '1.0.0' });
  } catch (err) {
    t.notMatch((err as Error).message, /secret/, 'password not in the message');
  }
  const fetchText = async () => ({ status: 200, body: 'v1.0.0' });
  t.throws(
    () =>
      new VersionChannels({ channels: { edge: { kind: 'forward', url: 'http://x.example.com/edge' } }, proxyVersion: '1.0.0', fetchText }),
    { code: 'GATE_ERR_CONFIG_INVALID', message: /in plain HTTP: use https:\/\/, or say insecure: true/ },
    'a plain http:// upstream only when asked for',
  );
  t.throws(() => new VersionChannels({ channels: { A: { kind: 'static', version: 'v1.0.0' } }, proxyVersion: '1.0.0' }), {
    code: 'GATE_ERR_CONFIG_INVALID',
  });
});

t.test('forward: fetches <url>/version, normalizes, caches for the TTL, refetches after', async (t) => {
  let now = 1_000_000;
  const upstream = fakeFetch([
    { status: 200, body: '1.4.0\n' },
    { status: 200, body: 'v1.5.0' },
  ]);
  const channels = new VersionChannels({
    channels: { 'stable/rolling': { kind: 'forward', url: 'https://updates.example.com/v1/stable/rolling' } },
    proxyVersion: '0.1.0',
    fetchText: upstream.fetchText,
    timeoutMs: 1234,
    now: () => now,
  });
  t.equal(await channels.version('stable/rolling'), 'v1.4.0');
  t.same(upstream.calls, [{ url: 'https://updates.example.com/v1/stable/rolling/version', timeoutMs: 1234 }]);
  now += 59_999;
  t.equal(await channels.version('stable/rolling'), 'v1.4.0', 'cached within the minute');
  t.equal(upstream.calls.length, 1);
  now += 1;
  t.equal(await channels.version('stable/rolling'), 'v1.5.0', 'refetched after a minute');
  t.equal(upstream.calls.length, 2);
});

t.test('forward: concurrent requests share one fetch', async (t) => {
  const upstream = fakeFetch([{ status: 200, body: 'v3.0.0' }]);
  const channels = new VersionChannels({
    channels: { edge: { kind: 'forward', url: 'http://x.example.com/edge', insecure: true } },
    proxyVersion: '0.1.0',
    fetchText: upstream.fetchText,
  });
  const answers = await Promise.all([channels.version('edge'), channels.version('edge'), channels.version('edge')]);
  t.same(answers, ['v3.0.0', 'v3.0.0', 'v3.0.0']);
  t.equal(upstream.calls.length, 1);
});

t.test('forward: failures are cached too, then retried', async (t) => {
  let now = 0;
  const upstream = fakeFetch([
    { status: 503, body: 'down' },
    { status: 200, body: 'none' },
  ]);
  const channels = new VersionChannels({
    channels: { edge: { kind: 'forward', url: 'https://u:secret@x.example.com/edge' } },
    proxyVersion: '0.1.0',
    fetchText: upstream.fetchText,
    now: () => now,
  });
  await t.rejects(channels.version('edge'), { code: 'GATE_ERR_CHANNEL_UPSTREAM', message: /answered HTTP 503/ });
  await channels.version('edge').catch((err: Error) => t.notMatch(err.message, /secret/, 'password not in the message'));
  t.equal(upstream.calls.length, 1, 'the failure was cached');
  now += 60_000;
  t.equal(await channels.version('edge'), 'none', '"none" passes through');
  t.equal(upstream.calls.length, 2);
});

t.test('forward: bad answers are upstream failures', async (t) => {
  const cases: Array<[{ status: number; body: string } | Error, RegExp]> = [
    [{ status: 200, body: 'latest' }, /answered "latest", not a version/],
    [{ status: 200, body: 'v'.repeat(300) }, /too long/],
    [{ status: 404, body: '' }, /HTTP 404/],
    [new Error('ECONNREFUSED'), /ECONNREFUSED/],
  ];
  for (const [answer, reason] of cases) {
    const channels = new VersionChannels({
      channels: { edge: { kind: 'forward', url: 'http://x.example.com/edge', insecure: true } },
      proxyVersion: '0.1.0',
      fetchText: fakeFetch([answer]).fetchText,
    });
    await t.rejects(channels.version('edge'), { code: 'GATE_ERR_CHANNEL_UPSTREAM', message: reason });
  }
});

t.test('forward: a fetcher that never answers is cut off by our own deadline', async (t) => {
  const channels = new VersionChannels({
    channels: { edge: { kind: 'forward', url: 'http://x.example.com/edge', insecure: true } },
    proxyVersion: '0.1.0',
    fetchText: () => new Promise(() => {}),
    timeoutMs: 50,
  });
  await t.rejects(channels.version('edge'), { code: 'GATE_ERR_CHANNEL_UPSTREAM', message: /no answer within 50 ms/ });
});

t.test('critical: static from its flag; forwarded from <url>/critical with its own cache and the same errors', async (t) => {
  let now = 0;
  const calls: string[] = [];
  const answers: Record<string, { status: number; body: string }> = {
    'https://x.example.com/edge/version': { status: 200, body: 'v2.0.0' },
    'https://x.example.com/edge/critical': { status: 200, body: 'yes\n' },
    'https://x.example.com/odd/critical': { status: 200, body: 'maybe' },
    'https://x.example.com/gone/critical': { status: 404, body: '' },
  };
  const fetchText: FetchText = async (url) => {
    calls.push(url);
    return answers[url] ?? { status: 500, body: '' };
  };
  const channels = new VersionChannels({
    channels: {
      hot: { kind: 'static', version: 'v1.0.1', critical: true },
      cold: { kind: 'static', version: 'v1.0.0' },
      edge: { kind: 'forward', url: 'https://x.example.com/edge' },
      odd: { kind: 'forward', url: 'https://x.example.com/odd' },
      gone: { kind: 'forward', url: 'https://x.example.com/gone' },
    },
    proxyVersion: '0.1.0',
    fetchText,
    now: () => now,
  });
  t.equal(await channels.critical('hot'), 'yes');
  t.equal(await channels.critical('cold'), 'no');
  t.equal(await channels.critical('default'), 'no');
  t.equal(await channels.version('edge'), 'v2.0.0');
  t.equal(await channels.critical('edge'), 'yes');
  t.equal(await channels.critical('edge'), 'yes');
  t.same(calls, ['https://x.example.com/edge/version', 'https://x.example.com/edge/critical'], 'each answer fetched once, cached apart');
  now += 60_000;
  t.equal(await channels.critical('edge'), 'yes');
  t.equal(calls.length, 3, 'refetched after the minute');
  await t.rejects(channels.critical('odd'), { code: 'GATE_ERR_CHANNEL_UPSTREAM', message: /answered "maybe", not yes or no/ });
  await t.rejects(channels.critical('gone'), { code: 'GATE_ERR_CHANNEL_UPSTREAM', message: /HTTP 404/ });
  await t.rejects(channels.critical('nope'), { code: 'GATE_ERR_CHANNEL_NOT_FOUND' });
  await t.rejects(channels.critical('../x'), { code: 'GATE_ERR_CHANNEL_NAME_INVALID' });
});
