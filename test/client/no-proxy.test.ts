import t from 'tap';
import { isLoopbackHost, noProxyMatches, parseNoProxy } from '../../lib/client/no-proxy.js';

// [NO_PROXY value, target host, target port, expected "direct"]
const CASES: Array<[string, string, number, boolean]> = [
  // empty and unset
  ['', 'example.com', 443, false],
  [' , ,, ', 'example.com', 443, false],
  // `*` anywhere in the list
  ['*', 'example.com', 443, true],
  ['*', '10.1.2.3', 22, true],
  ['foo.com, *', 'example.com', 443, true],
  ['*,foo.com', '2001:db8::1', 443, true],
  [' * ', 'anything', 1, true],
  ['*.', 'example.com', 443, false],
  // plain domain: itself and subdomains
  ['example.com', 'example.com', 443, true],
  ['example.com', 'api.example.com', 443, true],
  ['example.com', 'a.b.example.com', 80, true],
  ['example.com', 'notexample.com', 443, false],
  ['example.com', 'example.com.evil.net', 443, false],
  ['example.com', 'example.org', 443, false],
  // leading dot and `*.`: subdomains only
  ['.example.com', 'example.com', 443, false],
  ['.example.com', 'api.example.com', 443, true],
  ['*.example.com', 'example.com', 443, false],
  ['*.example.com', 'api.example.com', 443, true],
  ['*.example.com', 'xexample.com', 443, false],
  // case and whitespace
  ['EXAMPLE.com', 'Api.Example.COM', 443, true],
  ['  example.com  ,other.net', 'example.com', 443, true],
  ['other.net,\texample.com\t', 'www.example.com', 443, true],
  ['other.net,,example.com,', 'example.com', 443, true],
  // trailing dot: the same DNS name
  ['example.com.', 'example.com', 443, true],
  ['example.com', 'www.example.com.', 443, true],
  // domain with a port: that port only
  ['example.com:8443', 'example.com', 8443, true],
  ['example.com:8443', 'example.com', 443, false],
  ['example.com:8443', 'api.example.com', 8443, true],
  ['.example.com:3024', 'tunnel.example.com', 3024, true],
  ['.example.com:3024', 'tunnel.example.com', 443, false],
  ['*.example.com:3024', 'example.com', 3024, false],
  ['example.com:0', 'example.com', 443, false],
  ['example.com:99999', 'example.com', 443, false],
  ['example.com:abc', 'example.com', 443, false],
  // IPv4 address, with and without port
  ['10.1.2.3', '10.1.2.3', 443, true],
  ['10.1.2.3', '10.1.2.4', 443, false],
  ['10.1.2.3:443', '10.1.2.3', 443, true],
  ['10.1.2.3:443', '10.1.2.3', 3024, false],
  // an IP entry never matches a name and a name entry never matches an IP (no resolution)
  ['10.1.2.3', 'host.example.com', 443, false],
  ['2.3', '10.1.2.3', 443, false],
  // IPv4 CIDR, edges
  ['10.0.0.0/8', '10.255.255.255', 443, true],
  ['10.0.0.0/8', '11.0.0.0', 443, false],
  ['10.0.0.0/8', '9.255.255.255', 443, false],
  ['192.168.1.0/24', '192.168.1.0', 443, true],
  ['192.168.1.0/24', '192.168.1.255', 443, true],
  ['192.168.1.0/24', '192.168.2.0', 443, false],
  ['192.168.1.7/32', '192.168.1.7', 443, true],
  ['192.168.1.7/32', '192.168.1.8', 443, false],
  ['10.1.2.3/8', '10.200.0.1', 443, true], // host bits set: the network is still 10/8, as Go's ParseCIDR
  ['0.0.0.0/0', '203.0.113.9', 443, true],
  ['10.0.0.0/33', '10.0.0.1', 443, false], // invalid prefix ignored
  ['10.0.0.0/8', 'ten.example.com', 443, false],
  // IPv6 address, bracketed with port, CIDR
  ['2001:db8::1', '2001:db8::1', 443, true],
  ['2001:db8::1', '2001:db8::2', 443, false],
  ['2001:DB8::1', '2001:db8:0:0::1', 443, true],
  ['[2001:db8::1]:443', '2001:db8::1', 443, true],
  ['[2001:db8::1]:443', '2001:db8::1', 80, false],
  ['[2001:db8::1]', '2001:db8::1', 80, true],
  ['2001:db8::/32', '2001:db8:ffff::1', 443, true],
  ['2001:db8::/32', '2001:db9::1', 443, false],
  ['fd00::/8', 'fdff:1::1', 22, true],
  ['fd00::/8', 'fe80::1', 22, false],
  ['::/0', '2001:db8::5', 22, true],
  ['2001:db8::/129', '2001:db8::1', 443, false],
  // IPv4-mapped IPv6 targets meet IPv4 entries
  ['10.0.0.0/8', '::ffff:10.1.2.3', 443, true],
  ['10.1.2.3', '::ffff:10.1.2.3', 443, true],
  // IPv4 rules do not cover IPv6 and the reverse
  ['10.0.0.0/8', '2001:db8::1', 443, false],
  ['2001:db8::/32', '10.0.0.1', 443, false],
  // malformed entries are ignored, the rest still apply
  ['/8,example.com', 'example.com', 443, true],
  ['[::1,example.com', 'example.com', 443, true],
  ['exa mple.com', 'exa mple.com', 443, false],
  [':443', 'example.com', 443, false],
  ['ex*ample.com,10.0.0.0/8', '10.9.9.9', 443, true],
  // mixed list
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'db.corp', 5432, true],
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'corp', 5432, false],
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'fd00::1', 3024, true],
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'fd00::1', 443, false],
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'gate.example.com', 3024, true],
  ['localhost,.corp,10.0.0.0/8,[fd00::1]:3024,gate.example.com:3024', 'gate.example.com', 443, false],
];

t.test('NO_PROXY table', async (t) => {
  t.ok(CASES.length >= 50, `${CASES.length} cases`);
  for (const [value, host, port, direct] of CASES) {
    t.equal(
      noProxyMatches(parseNoProxy(value), host, port),
      direct,
      `NO_PROXY=${JSON.stringify(value)} ${host}:${port} → ${direct ? 'direct' : 'proxy'}`,
    );
  }
});

t.test('unparsable entries are reported as ignored', async (t) => {
  const rules = parseNoProxy('ok.com, 10.0.0.0/99, ex ample, host:port, [::1');
  t.same([...rules.ignored].sort(), ['10.0.0.0/99', '[::1', 'ex ample', 'host:port'].sort());
  t.equal(rules.domains.length, 1);
});

t.test('parseNoProxy of undefined has no rules', async (t) => {
  const rules = parseNoProxy(undefined);
  t.equal(rules.all, false);
  t.equal(rules.domains.length, 0);
  t.equal(noProxyMatches(rules, '10.0.0.1', 1), false);
});

t.test('loopback hosts', async (t) => {
  for (const host of [
    'localhost',
    'LOCALHOST',
    'localhost.',
    'db.localhost',
    '127.0.0.1',
    '127.255.0.9',
    '::1',
    '[::1]',
    '::ffff:127.0.0.1',
  ]) {
    t.ok(isLoopbackHost(host), `${host} is loopback`);
  }
  for (const host of ['localhost.example.com', 'mylocalhost', '128.0.0.1', '::2', '10.0.0.1', 'example.com']) {
    t.notOk(isLoopbackHost(host), `${host} is not loopback`);
  }
});
