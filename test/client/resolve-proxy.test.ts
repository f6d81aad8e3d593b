import t from 'tap';
import { inspect } from 'node:util';
import { firstNonEmpty, readProxyEnv } from '../../lib/client/env-proxy.js';
import { parseProxyUrl, redactProxyValue } from '../../lib/client/proxy-config.js';
import { proxyForTarget } from '../../lib/client/resolve-proxy.js';
import { formatHostPort, parseTarget } from '../../lib/client/target.js';
import { isGateError } from '../../lib/errors.js';

t.test('upper case wins; an empty upper-case value counts as unset (Go getEnvAny)', async (t) => {
  t.same(firstNonEmpty({ HTTPS_PROXY: 'a:1', https_proxy: 'b:1' }, 'HTTPS_PROXY', 'https_proxy'), { name: 'HTTPS_PROXY', value: 'a:1' });
  t.same(firstNonEmpty({ HTTPS_PROXY: '', https_proxy: 'b:1' }, 'HTTPS_PROXY', 'https_proxy'), { name: 'https_proxy', value: 'b:1' });
  t.equal(firstNonEmpty({ HTTPS_PROXY: '', https_proxy: '' }, 'HTTPS_PROXY', 'https_proxy'), undefined);
  const env = readProxyEnv({ http_proxy: 'h:1', NO_PROXY: 'x', no_proxy: 'y' });
  t.equal(env.httpsProxy, undefined);
  t.equal(env.httpProxy?.name, 'http_proxy');
  t.equal(env.noProxy?.value, 'x');
});

t.test('which variable applies to which target', async (t) => {
  const both = { HTTPS_PROXY: 'http://secure.proxy:1', HTTP_PROXY: 'http://plain.proxy:2' };
  t.equal(proxyForTarget('gate.example.com:3024', both)?.host, 'secure.proxy', 'raw dial: HTTPS_PROXY first');
  t.equal(proxyForTarget('gate.example.com:3024', { HTTP_PROXY: 'plain.proxy:2' })?.host, 'plain.proxy', 'raw dial: then HTTP_PROXY');
  t.equal(proxyForTarget('https://gate.example.com/x', both)?.host, 'secure.proxy');
  t.equal(proxyForTarget('http://gate.example.com/x', both)?.host, 'plain.proxy', 'http URL: HTTP_PROXY');
  t.equal(proxyForTarget('http://gate.example.com/x', { HTTPS_PROXY: 'secure.proxy:1' }), undefined, 'http URL never takes HTTPS_PROXY');
  t.equal(
    proxyForTarget('https://gate.example.com/x', { HTTP_PROXY: 'plain.proxy:2' }),
    undefined,
    'https URL never takes HTTP_PROXY (Go)',
  );
  t.equal(proxyForTarget('wss://gate.example.com/x', both)?.host, 'secure.proxy', 'wss is https');
  t.equal(proxyForTarget('gate.example.com:3024', {}), undefined, 'nothing set');
  t.equal(proxyForTarget('gate.example.com:3024', { https_proxy: 'lower.proxy:3' })?.source, 'https_proxy');
});

t.test("dial-back: a request to the platform's proxy takes HTTPS_PROXY, else HTTP_PROXY, whatever its scheme", async (t) => {
  const both = { HTTPS_PROXY: 'http://secure.proxy:1', HTTP_PROXY: 'http://plain.proxy:2' };
  t.equal(
    proxyForTarget('https://gate.example.com/v1/x', { HTTP_PROXY: 'plain.proxy:2' }, 'dial-back')?.host,
    'plain.proxy',
    'https URL, HTTP_PROXY alone: used',
  );
  t.equal(proxyForTarget('https://gate.example.com/v1/x', both, 'dial-back')?.host, 'secure.proxy', 'HTTPS_PROXY first');
  t.equal(proxyForTarget('http://gate.example.com/v1/x', both, 'dial-back')?.host, 'secure.proxy', 'the same for http://');
  t.equal(
    proxyForTarget('https://gate.example.com/v1/x', { ...both, NO_PROXY: 'gate.example.com' }, 'dial-back'),
    undefined,
    'NO_PROXY still applies',
  );
  t.equal(
    proxyForTarget('https://gate.example.com:3080/v1/x', { HTTP_PROXY: 'plain.proxy:2', NO_PROXY: 'gate.example.com:3024' }, 'dial-back')
      ?.host,
    'plain.proxy',
    'a host:port entry for another port does not',
  );
});

t.test('NO_PROXY and loopback make a target direct', async (t) => {
  const env = { HTTPS_PROXY: 'proxy.corp:3128', NO_PROXY: '.internal,10.0.0.0/8,gate.example.com:3024' };
  t.equal(proxyForTarget('db.internal:5432', env), undefined);
  t.equal(proxyForTarget('10.2.3.4:443', env), undefined);
  t.equal(proxyForTarget('gate.example.com:3024', env), undefined, 'host:port entry keeps the tunnel port off the proxy');
  t.equal(proxyForTarget('gate.example.com:443', env)?.host, 'proxy.corp');
  t.equal(proxyForTarget('https://gate.example.com:3024/', env), undefined);
  t.equal(proxyForTarget('https://gate.example.com/', env)?.host, 'proxy.corp', 'URL default port 443 is not 3024');
  for (const target of ['127.0.0.1:443', '127.0.0.2:3024', '[::1]:443', 'localhost:3080', 'app.localhost:80', 'http://localhost/']) {
    t.equal(proxyForTarget(target, { HTTPS_PROXY: 'proxy.corp:3128', HTTP_PROXY: 'proxy.corp:3128' }), undefined, `${target} direct`);
  }
  t.equal(
    proxyForTarget('gate.example.com:443', { HTTPS_PROXY: 'proxy.corp:3128', no_proxy: 'example.com' }),
    undefined,
    'no_proxy spelling',
  );
  t.equal(
    proxyForTarget('gate.example.com:443', { HTTPS_PROXY: 'proxy.corp:3128', NO_PROXY: 'other.com', no_proxy: 'example.com' })?.host,
    'proxy.corp',
    'NO_PROXY wins over no_proxy',
  );
});

t.test('proxy URL forms and default ports', async (t) => {
  const cases: Array<[string, string, string, number]> = [
    ['proxy.corp:3128', 'http', 'proxy.corp', 3128],
    ['proxy.corp', 'http', 'proxy.corp', 80],
    ['http://proxy.corp', 'http', 'proxy.corp', 80],
    ['http://proxy.corp/', 'http', 'proxy.corp', 80],
    ['HTTPS://Proxy.Corp', 'https', 'proxy.corp', 443],
    ['https://proxy.corp:8443', 'https', 'proxy.corp', 8443],
    ['socks5://proxy.corp', 'socks5', 'proxy.corp', 1080],
    ['socks5h://proxy.corp:9050', 'socks5h', 'proxy.corp', 9050],
    ['http://[fd00::5]:3128', 'http', 'fd00::5', 3128],
    ['127.0.0.2:3128', 'http', '127.0.0.2', 3128],
    ['  http://proxy.corp:3128  ', 'http', 'proxy.corp', 3128],
  ];
  for (const [value, scheme, host, port] of cases) {
    const proxy = parseProxyUrl(value, 'HTTPS_PROXY');
    t.same([proxy.scheme, proxy.host, proxy.port], [scheme, host, port], value);
  }
  t.equal(parseProxyUrl('http://[fd00::5]:3128').hostPort, '[fd00::5]:3128');
});

t.test('credentials are percent-decoded and never shown', async (t) => {
  const proxy = parseProxyUrl('http://al%40ice:p%3Ass%2Fw%40rd%25@proxy.corp:3128', 'HTTPS_PROXY');
  t.equal(proxy.username, 'al@ice');
  t.equal(proxy.password, 'p:ss/w@rd%');
  t.equal(proxy.display, 'http://al%40ice:***@proxy.corp:3128');
  t.equal(String(proxy), proxy.display);
  t.equal(JSON.stringify({ proxy }), JSON.stringify({ proxy: proxy.display }));
  t.notMatch(inspect(proxy), /p:ss|w@rd|p%3Ass/);
  t.notMatch(inspect({ nested: proxy }, { depth: 5 }), /w@rd/);
  t.equal(proxy.basicAuthorization(), `Basic ${Buffer.from('al@ice:p:ss/w@rd%').toString('base64')}`);
  const reparsed = parseProxyUrl(proxy.toUrlWithCredentials());
  t.equal(reparsed.password, 'p:ss/w@rd%', 'round trip through the credential URL');
  const userOnly = parseProxyUrl('http://bob@proxy.corp:1');
  t.equal(userOnly.display, 'http://bob@proxy.corp:1');
  t.equal(userOnly.basicAuthorization(), `Basic ${Buffer.from('bob:').toString('base64')}`);
  t.equal(parseProxyUrl('http://proxy.corp:1').basicAuthorization(), undefined);
});

t.test('malformed values are GATE_ERR_PROXY_ENV_INVALID naming the variable, not the password', async (t) => {
  const bad = [
    'ftp://proxy.corp:21',
    'http://user:s3cret@proxy.corp:99999',
    'http://user:s3cret@proxy.corp:3128/path',
    'http://user:s3cret@proxy.corp:3128?x=1',
    'http://user:s3cret@:3128',
    'http://user:%zzs3cret@proxy.corp:3128',
    'http://proxy corp:3128',
  ];
  for (const value of bad) {
    const err = t.throws(() => proxyForTarget('gate.example.com:443', { HTTPS_PROXY: value }), value) as Error;
    t.ok(isGateError(err, 'GATE_ERR_PROXY_ENV_INVALID'), `${value}: code`);
    t.match(err.message, /^HTTPS_PROXY=/, `${value}: names the variable`);
    t.notMatch(err.message, /s3cret/, `${value}: password not echoed`);
  }
});

t.test('a malformed value fails even for a target NO_PROXY covers', async (t) => {
  t.throws(() => proxyForTarget('127.0.0.1:443', { HTTPS_PROXY: 'gopher://x' }), { code: 'GATE_ERR_PROXY_ENV_INVALID' });
});

t.test('localhost and 127.0.0.1 as proxy host are refused with advice; 127.0.0.2 is fine', async (t) => {
  for (const value of ['localhost:3128', 'http://127.0.0.1:3128', 'socks5://LOCALHOST', 'http://[::1]:3128']) {
    const err = t.throws(() => parseProxyUrl(value, 'HTTP_PROXY')) as Error;
    t.ok(isGateError(err, 'GATE_ERR_PROXY_ENV_INVALID'));
    t.match(err.message, /another DNS name or a private IP/, value);
  }
  t.equal(parseProxyUrl('127.0.0.2:3128').host, '127.0.0.2');
});

t.test('redactProxyValue', async (t) => {
  t.equal(redactProxyValue('http://u:p@h:1'), 'http://u:***@h:1');
  t.equal(redactProxyValue('u:p@h:1'), 'u:***@h:1');
  t.equal(redactProxyValue('http://u@h:1'), 'http://u@h:1');
  t.equal(redactProxyValue('http://u:p@ss@h:1'), 'http://u:***@h:1');
  t.equal(redactProxyValue('h:1'), 'h:1');
});

t.test('targets', async (t) => {
  t.same(parseTarget('example.com:443'), { host: 'example.com', port: 443, scheme: undefined });
  t.same(parseTarget('[2001:db8::1]:3024'), { host: '2001:db8::1', port: 3024, scheme: undefined });
  t.same(parseTarget('https://example.com/x'), { host: 'example.com', port: 443, scheme: 'https' });
  t.same(parseTarget('http://example.com'), { host: 'example.com', port: 80, scheme: 'http' });
  t.same(parseTarget('http://[::1]:8080/'), { host: '::1', port: 8080, scheme: 'http' });
  t.same(parseTarget('ws://example.com'), { host: 'example.com', port: 80, scheme: 'http' });
  for (const bad of [
    'example.com',
    'example.com:0',
    'example.com:65536',
    'example.com:http',
    '2001:db8::1:443',
    '[2001:db8::1]443',
    '[nothex]:1',
    ':443',
    'ftp://x/',
    'http://',
  ]) {
    t.throws(() => parseTarget(bad), { code: 'GATE_ERR_TARGET_INVALID' }, bad);
  }
  t.equal(formatHostPort('2001:db8::1', 443), '[2001:db8::1]:443');
  t.equal(formatHostPort('example.com', 443), 'example.com:443');
});
