import t from 'tap';
import { parseConnectResponse } from '../../lib/client/connect-response.js';
import { connectRequest } from '../../lib/client/http-connect.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

t.test('complete 200 with tunnel bytes behind it', async (t) => {
  const head = 'HTTP/1.1 200 Connection established\r\nProxy-Agent: x\r\n\r\n';
  const parsed = parseConnectResponse(b(`${head}SSH-2.0-hello`));
  if (parsed.state !== 'done') throw new Error(parsed.state);
  t.equal(parsed.status, 200);
  t.equal(parsed.reason, 'Connection established');
  t.equal(parsed.headerBytes, head.length, 'header ends exactly at the blank line');
  t.same(parsed.headers, [['proxy-agent', 'x']]);
});

t.test('bare LF line endings and HTTP/1.0 without reason', async (t) => {
  const parsed = parseConnectResponse(b('HTTP/1.0 200\n\nX'));
  if (parsed.state !== 'done') throw new Error(parsed.state);
  t.equal(parsed.status, 200);
  t.equal(parsed.headerBytes, 'HTTP/1.0 200\n\n'.length);
});

t.test('every split point of a response needs more until the blank line', async (t) => {
  const full = b('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="x"\r\n\r\n');
  for (let i = 0; i < full.length; i++) {
    t.equal(parseConnectResponse(full.subarray(0, i)).state, 'need-more', `${i} bytes`);
  }
  const parsed = parseConnectResponse(full);
  t.equal(parsed.state === 'done' && parsed.status, 407);
});

t.test('header cap', async (t) => {
  const big = b(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(20000)}\r\n\r\n`);
  t.equal(parseConnectResponse(big).state, 'too-large');
  t.equal(parseConnectResponse(big, 32 * 1024).state, 'done');
  t.equal(parseConnectResponse(big.subarray(0, 16383)).state, 'need-more', 'under the cap still waits');
  t.equal(parseConnectResponse(big.subarray(0, 16384)).state, 'too-large', 'at the cap without an end');
});

t.test('malformed answers fail early', async (t) => {
  t.equal(parseConnectResponse(b('SSH-2.0-OpenSSH\r\n')).state, 'malformed');
  t.equal(parseConnectResponse(b('garbage')).state, 'malformed', 'not HTTP after 5 bytes');
  t.equal(parseConnectResponse(b('HTTP/2 200\r\n\r\n')).state, 'malformed');
  t.equal(parseConnectResponse(b('HTTP/1.1 20 OK\r\n\r\n')).state, 'malformed');
  t.equal(parseConnectResponse(b('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n')).state, 'malformed');
  t.equal(parseConnectResponse(b('HTTP')).state, 'need-more');
});

t.test('CONNECT request: authority form, bracketed IPv6, Basic credentials', async (t) => {
  const plain = connectRequest('gate.example.com', 3024, parseProxyUrl('proxy.corp:3128'));
  t.equal(plain, 'CONNECT gate.example.com:3024 HTTP/1.1\r\nHost: gate.example.com:3024\r\n\r\n');
  const v6 = connectRequest('2001:db8::1', 443, parseProxyUrl('http://u:p%20w@proxy.corp:3128'));
  t.match(v6, /^CONNECT \[2001:db8::1\]:443 HTTP\/1\.1\r\nHost: \[2001:db8::1\]:443\r\n/);
  t.match(v6, `Proxy-Authorization: Basic ${Buffer.from('u:p w').toString('base64')}\r\n\r\n`);
});
