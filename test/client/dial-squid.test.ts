// Real peer: squid (apt-get install squid), started on 127.0.0.2 by the test.
import t from 'tap';
import { readBytes } from '../helpers/net.js';
import { dial } from '../../lib/client/dial.js';
import { dialTls } from '../../lib/client/dial-tls.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startEchoServer, startTlsEchoServer } from '../helpers/echo-servers.js';
import { startSquid } from '../helpers/squid.js';

t.test('squid without auth: CONNECT to a non-443 port, server-speaks-first greeting delivered, TLS inside', async (t) => {
  const proxy = await startSquid(t);
  if (!proxy) return;
  // Squid writes "200 Connection established" and the upstream's first bytes together when
  // they are already there: the greeting is exactly what a naive CONNECT client drops.
  const echo = await startEchoServer(t, { greeting: 'SSH-2.0-fake\r\n' });
  const { socket } = await dial(echo.address, { proxy: parseProxyUrl(proxy.url) });
  t.equal(await readBytes(socket, 14), 'SSH-2.0-fake\r\n');
  socket.write('ping');
  t.equal(await readBytes(socket, 4), 'ping');
  socket.destroy();
  const server = await startTlsEchoServer(t, { alpn: ['gate-postgres'] });
  const tls = await dialTls(server.address, {
    proxy: parseProxyUrl(proxy.url),
    alpn: ['gate-postgres'],
    requireAlpn: true,
    serverName: 'localhost',
    ca: devCertificates().ca.cert,
  });
  t.equal(tls.alpn, 'gate-postgres');
  tls.socket.destroy();
});

t.test('squid with Basic auth and a password that needs percent-encoding', async (t) => {
  const password = 'p@ss:w/rd %&ü';
  const proxy = await startSquid(t, { users: { alice: password } });
  if (!proxy) return;
  const echo = await startEchoServer(t);
  const base = `${proxy.host}:${proxy.port}`;
  await t.rejects(dial(echo.address, { proxy: parseProxyUrl(`http://${base}`) }), { code: 'GATE_ERR_PROXY_AUTH_REQUIRED', status: 407 });
  await t.rejects(dial(echo.address, { proxy: parseProxyUrl(`http://alice:nope@${base}`) }), { code: 'GATE_ERR_PROXY_AUTH_REQUIRED' });
  const encoded = `http://alice:${encodeURIComponent(password)}@${base}`;
  const { socket, via } = await dial(echo.address, { env: {}, proxy: parseProxyUrl(encoded, 'HTTPS_PROXY') });
  t.equal(via?.display, `http://alice:***@${base}`);
  socket.write('hello squid');
  t.equal(await readBytes(socket, 11), 'hello squid');
  socket.destroy();
});
