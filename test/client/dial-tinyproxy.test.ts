// Real peer: tinyproxy (apt-get install tinyproxy), started on 127.0.0.2 by the test.
import t from 'tap';
import { echoOnce } from '../helpers/net.js';
import { dial } from '../../lib/client/dial.js';
import { dialTls } from '../../lib/client/dial-tls.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startEchoServer, startTlsEchoServer } from '../helpers/echo-servers.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

t.test('CONNECT through tinyproxy without auth', async (t) => {
  const proxy = await startTinyproxy(t);
  if (!proxy) return;
  const echo = await startEchoServer(t);
  const { socket, via } = await dial(echo.address, { proxy: parseProxyUrl(proxy.url) });
  t.equal(via?.display, proxy.url);
  t.equal(await echoOnce(socket, 'through tinyproxy'), 'through tinyproxy');
  socket.destroy();
});

t.test('tinyproxy with BasicAuth: 407 without or with wrong credentials, tunnel with the right ones', async (t) => {
  const proxy = await startTinyproxy(t, { basicAuth: { user: 'gate', pass: 'Tiny-pass_1.x' } });
  if (!proxy) return;
  const echo = await startEchoServer(t);
  const base = `${proxy.host}:${proxy.port}`;
  await t.rejects(dial(echo.address, { proxy: parseProxyUrl(`http://${base}`) }), {
    code: 'GATE_ERR_PROXY_AUTH_REQUIRED',
    status: 407,
    message: /requires authentication/,
  });
  await t.rejects(dial(echo.address, { proxy: parseProxyUrl(`http://gate:wrong-pass@${base}`) }), {
    code: 'GATE_ERR_PROXY_AUTH_REQUIRED',
    message: /^(?!.*wrong-pass).*rejected the credentials of user "gate"/,
  });
  const { socket } = await dial(echo.address, { proxy: parseProxyUrl(`http://gate:Tiny-pass_1.x@${base}`) });
  t.equal(await echoOnce(socket, 'authorised'), 'authorised');
  socket.destroy();
});

t.test('dialTls through tinyproxy negotiates the route ALPN', async (t) => {
  const proxy = await startTinyproxy(t);
  if (!proxy) return;
  const server = await startTlsEchoServer(t, { alpn: ['gate-reversetunnel'] });
  const { socket, alpn, via } = await dialTls(server.address, {
    proxy: parseProxyUrl(proxy.url),
    alpn: ['gate-reversetunnel'],
    requireAlpn: true,
    serverName: 'localhost',
    ca: devCertificates().ca.cert,
  });
  t.equal(alpn, 'gate-reversetunnel');
  t.equal(via?.host, '127.0.0.2');
  t.equal(await echoOnce(socket, 'tls via tinyproxy'), 'tls via tinyproxy');
  socket.destroy();
});
