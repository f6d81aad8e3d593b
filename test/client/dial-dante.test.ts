// Real peer: danted (apt-get install dante-server), started on 127.0.0.2 by the test. The
// authenticated case creates (and removes) a throwaway system user, so it needs root.
import t from 'tap';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { readBytes } from '../helpers/net.js';
import { dial } from '../../lib/client/dial.js';
import { dialTls } from '../../lib/client/dial-tls.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startDante } from '../helpers/dante.js';
import { freePort } from '../helpers/daemon.js';
import { startEchoServer, startTlsEchoServer } from '../helpers/echo-servers.js';

t.test('SOCKS5 through dante without auth: socks5h sends the name, socks5 resolves locally', async (t) => {
  const proxy = await startDante(t);
  if (!proxy) return;
  const echo = await startEchoServer(t, { greeting: 'GREETING' });
  for (const scheme of ['socks5h', 'socks5'] as const) {
    // `localhost` resolves from /etc/hosts on both sides: no DNS query leaves the machine.
    const { socket, via } = await dial(`localhost:${echo.port}`, { proxy: parseProxyUrl(`${scheme}://${proxy.host}:${proxy.port}`) });
    t.equal(via?.scheme, scheme);
    // Consumer attached a turn later: the greeting that came with the SOCKS reply must still be there.
    await new Promise((resolve) => setImmediate(resolve));
    t.equal(await readBytes(socket, 8), 'GREETING', `${scheme}: server-first bytes kept`);
    socket.write('echo');
    t.equal(await readBytes(socket, 4), 'echo');
    socket.destroy();
  }
  // socks5 offers a name's addresses in turn: this dante has no IPv6 way out, so it answers the
  // ::1 (as a resolver with "::1 localhost" gives it first) with a reply about that address, and
  // the next address, 127.0.0.1, is offered on a new proxy connection.
  const asked: string[] = [];
  const lookup = ((name: string, _options: unknown, callback: (err: null, found: LookupAddress[]) => void) => {
    asked.push(name);
    setImmediate(() =>
      callback(null, [
        { address: '::1', family: 6 },
        { address: '127.0.0.1', family: 4 },
      ]),
    );
  }) as unknown as LookupFunction;
  const local = parseProxyUrl(`socks5://${proxy.host}:${proxy.port}`);
  const both = await dial(`echo.test:${echo.port}`, { proxy: local, lookup });
  t.equal(await readBytes(both.socket, 8), 'GREETING', 'socks5: the next address of the name was offered');
  both.socket.destroy();
  t.same(asked, ['echo.test'], 'resolved here, once');
  const closedPort = await freePort('127.0.0.1');
  await t.rejects(
    dial(`echo.test:${closedPort}`, { proxy: local, lookup }),
    { code: 'GATE_ERR_PROXY_STATUS', status: 5, message: /127\.0\.0\.1.*ConnectionRefused/ },
    'every address failing: the last reply is the error',
  );
  const socks = parseProxyUrl(`socks5h://${proxy.host}:${proxy.port}`);
  await t.rejects(dial('127.0.0.3:443', { proxy: socks }), { code: 'GATE_ERR_PROXY_FORBIDDEN', status: 2, message: /NotAllowed/ });
  const closed = await freePort('127.0.0.1');
  await t.rejects(dial(`127.0.0.1:${closed}`, { proxy: socks }), {
    code: 'GATE_ERR_PROXY_STATUS',
    status: 5,
    message: /ConnectionRefused/,
  });
  const server = await startTlsEchoServer(t, { alpn: ['gate-redis'] });
  const tls = await dialTls(server.address, {
    proxy: parseProxyUrl(`socks5h://${proxy.host}:${proxy.port}`),
    alpn: ['gate-redis'],
    requireAlpn: true,
    serverName: 'localhost',
    ca: devCertificates().ca.cert,
  });
  t.equal(tls.alpn, 'gate-redis');
  tls.socket.destroy();
});

t.test('SOCKS5 username/password through dante (system user, password needing percent-encoding)', async (t) => {
  const password = 'p@ss:w/rd %#x';
  const proxy = await startDante(t, { auth: { password } });
  if (!proxy?.user) return;
  const echo = await startEchoServer(t);
  const base = `${proxy.host}:${proxy.port}`;
  await t.rejects(dial(echo.address, { proxy: parseProxyUrl(`socks5://${base}`) }), {
    code: 'GATE_ERR_PROXY_AUTH_REQUIRED',
    message: /requires SOCKS5 authentication/,
  });
  const wrong = await dial(echo.address, { proxy: parseProxyUrl(`socks5://${proxy.user.name}:not-it@${base}`) }).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  t.match(wrong, { code: 'GATE_ERR_PROXY_AUTH_REQUIRED' });
  t.notMatch(wrong?.message, /not-it/);
  const { socket } = await dial(echo.address, {
    proxy: parseProxyUrl(`socks5h://${proxy.user.name}:${encodeURIComponent(password)}@${base}`),
  });
  socket.write('authed');
  t.equal(await readBytes(socket, 6), 'authed');
  socket.destroy();
});
