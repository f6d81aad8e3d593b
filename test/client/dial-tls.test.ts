import t from 'tap';
import { echoOnce, startMuteServer } from '../helpers/net.js';
import { dialTls } from '../../lib/client/dial-tls.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startTlsEchoServer } from '../helpers/echo-servers.js';
import { startFakeProxy, tunnelTo } from '../helpers/fake-proxy.js';

const ca = devCertificates().ca.cert;

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

t.test('direct TLS with the route ALPN, SNI and CA checked', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-postgres', 'gate-mysql'] });
  const { socket, alpn, via } = await dialTls(server.address, {
    env: {},
    alpn: ['gate-postgres'],
    requireAlpn: true,
    serverName: 'localhost',
    ca,
  });
  t.equal(alpn, 'gate-postgres');
  t.equal(via, undefined);
  t.equal(socket.servername, 'localhost');
  t.equal(await echoOnce(socket, 'over tls'), 'over tls');
  socket.destroy();
  t.same(server.alpnSeen, ['gate-postgres']);
});

t.test('a server that ignores ALPN is GATE_ERR_ALPN_MISMATCH when ALPN is required', async (t) => {
  const server = await startTlsEchoServer(t);
  await t.rejects(dialTls(server.address, { env: {}, alpn: ['gate-reversetunnel'], requireAlpn: true, serverName: 'localhost', ca }), {
    code: 'GATE_ERR_ALPN_MISMATCH',
    message: /no ALPN protocol/,
  });
  const lax = await dialTls(server.address, { env: {}, alpn: ['gate-reversetunnel'], serverName: 'localhost', ca });
  t.equal(lax.alpn, undefined, 'without requireAlpn the connection stands');
  lax.socket.destroy();
});

t.test('no common ALPN or an untrusted certificate fails the handshake', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-mysql'] });
  await t.rejects(dialTls(server.address, { env: {}, alpn: ['gate-postgres'], requireAlpn: true, serverName: 'localhost', ca }), {
    code: 'GATE_ERR_TLS_HANDSHAKE',
  });
  await t.rejects(dialTls(server.address, { env: {}, alpn: ['gate-mysql'], serverName: 'localhost' }), { code: 'GATE_ERR_TLS_HANDSHAKE' });
  await t.rejects(dialTls(server.address, { env: {}, alpn: ['gate-mysql'], serverName: 'wrong.example', ca }), {
    code: 'GATE_ERR_TLS_HANDSHAKE',
  });
});

t.test('TLS through a CONNECT proxy and TLS inside TLS through an https:// proxy', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-reversetunnel'] });
  const plain = await startFakeProxy(t, tunnelTo(server.address));
  const a = await dialTls('gate.example.com:3024', {
    proxy: parseProxyUrl(plain.url),
    alpn: ['gate-reversetunnel'],
    requireAlpn: true,
    serverName: 'localhost',
    ca,
  });
  t.equal(a.alpn, 'gate-reversetunnel');
  t.equal(await echoOnce(a.socket, 'plain proxy'), 'plain proxy');
  a.socket.destroy();
  const secure = await startFakeProxy(t, tunnelTo(server.address), { tls: true });
  const b = await dialTls('gate.example.com:3024', {
    proxy: parseProxyUrl(secure.url),
    proxyTls: { ca, servername: 'gate.test' },
    alpn: ['gate-reversetunnel'],
    requireAlpn: true,
    serverName: 'localhost',
    ca,
  });
  t.equal(b.alpn, 'gate-reversetunnel');
  t.equal(await echoOnce(b.socket, 'tls in tls'), 'tls in tls');
  b.socket.destroy();
});

t.test('a server that never answers the ClientHello: handshake timeout, abort, no timer left', async (t) => {
  const { address, held } = await startMuteServer(t);
  const before = timers();
  await t.rejects(dialTls(address, { env: {}, alpn: ['gate-postgres'], serverName: 'localhost', ca, handshakeTimeoutMs: 100 }), {
    code: 'GATE_ERR_TLS_HANDSHAKE_TIMEOUT',
  });
  t.equal(timers(), before, 'handshake timer cleared');
  const controller = new AbortController();
  const pending = dialTls(address, { env: {}, alpn: ['gate-postgres'], serverName: 'localhost', ca, signal: controller.signal });
  while (held.size < 2) await new Promise((resolve) => setImmediate(resolve));
  controller.abort();
  await t.rejects(pending, { code: 'GATE_ERR_DIAL_ABORTED' });
  t.equal(timers(), before, 'abort leaves no timer');
});
