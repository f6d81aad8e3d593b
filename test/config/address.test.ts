import t from 'tap';
import { formatAddress, isCidr, isDnsName, parseAddress } from '../../lib/config/address.js';
import { parseDuration } from '../../lib/config/duration.js';

t.test('parses host:port, [v6]:port and :port', async (t) => {
  t.same(parseAddress('example.com:443'), { ok: true, address: { host: 'example.com', port: 443 } });
  t.same(parseAddress('Gate.Example.COM:443'), { ok: true, address: { host: 'gate.example.com', port: 443 } });
  t.same(parseAddress('10.1.2.3:80'), { ok: true, address: { host: '10.1.2.3', port: 80 } });
  t.same(parseAddress('[::1]:3080'), { ok: true, address: { host: '::1', port: 3080 } });
  t.same(parseAddress('[2001:db8::1]:5432'), { ok: true, address: { host: '2001:db8::1', port: 5432 } });
  t.same(parseAddress(':3080', { defaultHost: '0.0.0.0' }), { ok: true, address: { host: '0.0.0.0', port: 3080 } });
  t.same(parseAddress('  localhost:22 '), { ok: true, address: { host: 'localhost', port: 22 } });
});

t.test('default port and bare IPv6', async (t) => {
  t.same(parseAddress('gate.example.com', { defaultPort: 3080 }), { ok: true, address: { host: 'gate.example.com', port: 3080 } });
  t.same(parseAddress('::1', { defaultPort: 443 }), { ok: true, address: { host: '::1', port: 443 } });
  t.same(parseAddress('[fe80::1]', { defaultPort: 443 }), { ok: true, address: { host: 'fe80::1', port: 443 } });
});

t.test('port 0 only when allowed', async (t) => {
  t.same(parseAddress('127.0.0.1:0', { allowZeroPort: true }), { ok: true, address: { host: '127.0.0.1', port: 0 } });
  const refused = parseAddress('127.0.0.1:0');
  t.equal(refused.ok, false);
  if (!refused.ok) t.match(refused.reason, /1-65535/);
});

t.test('refuses malformed addresses with a reason', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['', /empty/],
    ['example.com', /no port/],
    [':3080', /no host/],
    ['example.com:99999', /not a number/],
    ['example.com:http', /not a number/],
    ['example.com:', /not a number/],
    ['2001:db8::1:80x', /IPv6 address with a port/],
    ['a:b:c', /IPv6 address with a port/],
    ['[::1', /without closing/],
    ['[example.com]:80', /not an IPv6/],
    ['[::1]80', /after "\]"/],
    ['https://example.com:443', /URL scheme/],
    ['exa mple.com:80', /white space/],
    ['-bad-.example.com:80', /neither an IP address nor a DNS name/],
    ['under_score.example.com:80', /neither/],
    ['1.2.3:80', /neither/],
    ['300.1.1.1:80', /neither/],
  ];
  for (const [text, reason] of cases) {
    const result = parseAddress(text);
    t.equal(result.ok, false, `refuses ${JSON.stringify(text)}`);
    if (!result.ok) t.match(result.reason, reason, `reason for ${JSON.stringify(text)}`);
  }
});

t.test('formatAddress round-trips', async (t) => {
  for (const text of ['example.com:443', '[::1]:3080', '10.0.0.1:22', '[2001:db8::7]:1']) {
    const parsed = parseAddress(text);
    t.ok(parsed.ok);
    if (parsed.ok) t.equal(formatAddress(parsed.address), text);
  }
});

t.test('DNS names and CIDRs', async (t) => {
  t.ok(isDnsName('a.b.example.'));
  t.ok(isDnsName('x'.repeat(63) + '.com'));
  t.notOk(isDnsName('x'.repeat(64) + '.com'));
  t.notOk(isDnsName(`${'a.'.repeat(127)}com`), 'over 253 octets');
  t.notOk(isDnsName('a..b'));
  t.ok(isCidr('10.0.0.0/8'));
  t.ok(isCidr('::/0'));
  t.ok(isCidr('192.168.1.1'));
  t.notOk(isCidr('10.0.0.0/33'));
  t.notOk(isCidr('fd00::/129'));
  t.notOk(isCidr('10.0.0.0/x'));
  t.notOk(isCidr('example.com/8'));
});

t.test('durations', async (t) => {
  t.equal(parseDuration('10s'), 10_000);
  t.equal(parseDuration('500ms'), 500);
  t.equal(parseDuration('1m30s'), 90_000);
  t.equal(parseDuration('1.5s'), 1500);
  t.equal(parseDuration('2h'), 7_200_000);
  t.equal(parseDuration('0'), 0);
  t.equal(parseDuration('10'), undefined, 'a bare number has no unit');
  t.equal(parseDuration('10 s'), undefined);
  t.equal(parseDuration('-1s'), undefined);
  t.equal(parseDuration('1d'), undefined);
  t.equal(parseDuration(''), undefined);
});

t.test('nearest-key suggestions', async (t) => {
  const { nearestKey, editDistance } = await import('../../lib/config/suggest.js');
  t.equal(editDistance('kitten', 'sitting'), 3);
  t.equal(editDistance('', 'abc'), 3);
  t.equal(nearestKey('web_listen_adr', ['web_listen_addr', 'listen_addr']), 'web_listen_addr');
  t.equal(nearestKey('Web-Listen-Addr', ['web_listen_addr']), 'web_listen_addr', 'case and dashes');
  t.equal(nearestKey('mongo', ['mongodb', 'redis']), 'mongodb', 'prefix');
  t.equal(nearestKey('colour', ['web_listen_addr', 'redis']), undefined);
  t.equal(nearestKey('ab', ['mongodb']), undefined);
});
