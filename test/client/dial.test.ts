import t from 'tap';
import type { Socket } from 'node:net';
import { dial } from '../../lib/client/dial.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { ProxyError } from '../../lib/client/proxy-error.js';
import { isGateError, type ErrorCode } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { freePort } from '../helpers/daemon.js';
import { startEchoServer } from '../helpers/echo-servers.js';
import { answer, startFakeProxy, tunnelTo } from '../helpers/fake-proxy.js';

/** Reads from a socket until `n` bytes arrived (or it ends). */
function readBytes(socket: Socket, n: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (d: Buffer): void => {
      got += d.toString('latin1');
      if (got.length >= n) {
        socket.removeListener('data', onData);
        resolve(got);
      }
    };
    socket.on('data', onData);
    socket.once('end', () => resolve(got));
    socket.once('error', reject);
  });
}

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

t.test('direct dial reaches the target; refused is GATE_ERR_DIAL_REFUSED', async (t) => {
  const echo = await startEchoServer(t);
  const { socket, via } = await dial(echo.address, { env: {} });
  t.equal(via, undefined);
  socket.write('ping');
  t.equal(await readBytes(socket, 4), 'ping');
  socket.destroy();
  const closedPort = await freePort('127.0.0.1');
  await t.rejects(dial(`127.0.0.1:${closedPort}`, { env: {} }), { code: 'GATE_ERR_DIAL_REFUSED' });
});

t.test('bytes written right after 200 in the same write reach the caller', async (t) => {
  const echo = await startEchoServer(t, { greeting: 'HELLO' });
  const proxy = await startFakeProxy(t, tunnelTo(echo.address, 'EARLY-BYTES'));
  const { socket, via } = await dial('svc.gate.test:3024', { proxy: parseProxyUrl(proxy.url) });
  t.equal(via?.display, proxy.url);
  // Attach the consumer only after an extra turn of the event loop: nothing may be lost meanwhile.
  await new Promise((resolve) => setImmediate(resolve));
  const first = await readBytes(socket, 'EARLY-BYTES'.length + 'HELLO'.length);
  t.equal(first, 'EARLY-BYTESHELLO', 'early bytes first, then the tunnel');
  socket.write('echo me');
  t.equal(await readBytes(socket, 7), 'echo me');
  socket.destroy();
  t.same(proxy.requests[0], { method: 'CONNECT', target: 'svc.gate.test:3024', headers: { host: 'svc.gate.test:3024' } });
});

t.test('early bytes also survive when the caller pipes', async (t) => {
  const echo = await startEchoServer(t);
  const proxy = await startFakeProxy(t, tunnelTo(echo.address, 'X'.repeat(5000)));
  const { socket } = await dial('svc.gate.test:1', { proxy: parseProxyUrl(proxy.url) });
  const { PassThrough } = await import('node:stream');
  const sink = new PassThrough();
  socket.pipe(sink);
  t.equal((await readBytes(sink as unknown as Socket, 5000)).length, 5000);
  socket.destroy();
});

t.test('Proxy-Authorization carries percent-decoded credentials', async (t) => {
  const echo = await startEchoServer(t);
  const proxy = await startFakeProxy(t, tunnelTo(echo.address));
  const { socket } = await dial('[2001:db8::7]:443', {
    proxy: parseProxyUrl(`http://us%3Aer:p%40ss%20w%2Frd@${proxy.host}:${proxy.port}`),
  });
  socket.destroy();
  t.equal(proxy.requests[0]?.target, '[2001:db8::7]:443');
  t.equal(proxy.requests[0]?.headers['proxy-authorization'], `Basic ${Buffer.from('us:er:p@ss w/rd').toString('base64')}`);
});

t.test('the environment decides: the proxy variable, loopback direct, redacted via', async (t) => {
  const echo = await startEchoServer(t);
  const proxy = await startFakeProxy(t, tunnelTo(echo.address));
  const env = { https_proxy: `http://bob:hunter2@${proxy.host}:${proxy.port}`, NO_PROXY: 'other.example,svc.gate.test:9' };
  const viaProxy = await dial('svc.gate.test:3024', { env });
  t.equal(viaProxy.via?.display, `http://bob:***@${proxy.host}:${proxy.port}`);
  t.equal(viaProxy.via?.source, 'https_proxy');
  viaProxy.socket.destroy();
  const direct = await dial(echo.address, { env });
  t.equal(direct.via, undefined, 'loopback target is direct');
  direct.socket.destroy();
  t.equal(proxy.connections(), 1, 'only the first dial went through the proxy');
  const overridden = await dial(echo.address, { env: {}, proxy: parseProxyUrl(proxy.url) });
  t.equal(overridden.via?.host, proxy.host, 'an explicit proxy is used even for loopback');
  overridden.socket.destroy();
  t.equal(proxy.connections(), 2);
  await t.rejects(dial('svc.gate.test:3024', { env: { HTTPS_PROXY: 'http://u:s3cret@localhost:1' } }), {
    code: 'GATE_ERR_PROXY_ENV_INVALID',
    message: /^(?!.*s3cret)/,
  });
});

const statusCases: Array<[string, ErrorCode, number]> = [
  ['HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="x"\r\n\r\n', 'GATE_ERR_PROXY_AUTH_REQUIRED', 407],
  ['HTTP/1.1 403 Forbidden\r\n\r\n', 'GATE_ERR_PROXY_FORBIDDEN', 403],
  ['HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad', 'GATE_ERR_PROXY_STATUS', 502],
  ['HTTP/1.0 503 Service Unavailable\r\n\r\n', 'GATE_ERR_PROXY_STATUS', 503],
];
for (const [raw, code, status] of statusCases) {
  t.test(`a ${status} answer is ${code} naming the proxy without its password`, async (t) => {
    const proxy = await startFakeProxy(t, answer(raw, { keepOpen: true }));
    const config = parseProxyUrl(`http://carol:t0psecret@${proxy.host}:${proxy.port}`);
    const err = await dial('svc.gate.test:443', { proxy: config }).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof ProxyError, 'a ProxyError');
    t.ok(isGateError(err, code), `code ${code}`);
    t.equal((err as ProxyError).status, status);
    t.equal((err as ProxyError).proxy, `http://carol:***@${proxy.host}:${proxy.port}`);
    t.match((err as Error).message, `${proxy.host}:${proxy.port}`);
    t.notMatch((err as Error).message, /t0psecret/);
    await proxy.closed();
    t.pass('the connection to the proxy was closed');
  });
}

t.test('a 64 KiB response header is a bounded error', async (t) => {
  const proxy = await startFakeProxy(t, answer(`HTTP/1.1 200 OK\r\nX-Junk: ${'j'.repeat(64 * 1024)}\r\n\r\n`, { keepOpen: true }));
  await t.rejects(dial('svc.gate.test:443', { proxy: parseProxyUrl(proxy.url) }), { code: 'GATE_ERR_PROXY_HEADER_TOO_LARGE' });
  await proxy.closed();
  const roomy = await startFakeProxy(t, answer(`HTTP/1.1 200 OK\r\nX-Junk: ${'j'.repeat(20 * 1024)}\r\n\r\n`, { keepOpen: true }));
  const { socket } = await dial('svc.gate.test:443', { proxy: parseProxyUrl(roomy.url), maxProxyHeaderBytes: 32 * 1024 });
  t.pass('a larger cap lets a 20 KiB header through');
  socket.destroy();
});

t.test('a non-HTTP answer is GATE_ERR_PROXY_RESPONSE_MALFORMED', async (t) => {
  const proxy = await startFakeProxy(t, answer('SSH-2.0-OpenSSH_9.2\r\n', { keepOpen: true }));
  await t.rejects(dial('svc.gate.test:443', { proxy: parseProxyUrl(proxy.url) }), { code: 'GATE_ERR_PROXY_RESPONSE_MALFORMED' });
});

t.test('a proxy that closes mid-response is GATE_ERR_PROXY_CLOSED', async (t) => {
  const proxy = await startFakeProxy(t, answer('HTTP/1.1 200 Conn'));
  await t.rejects(dial('svc.gate.test:443', { proxy: parseProxyUrl(proxy.url) }), { code: 'GATE_ERR_PROXY_CLOSED', message: /closed/ });
  const silent = await startFakeProxy(t, (socket) => socket.end());
  await t.rejects(dial('svc.gate.test:443', { proxy: parseProxyUrl(silent.url) }), { code: 'GATE_ERR_PROXY_CLOSED' });
});

t.test('a proxy that never answers times out, closes the socket, leaves no timer', async (t) => {
  const proxy = await startFakeProxy(t, () => undefined);
  const before = timers();
  const err = await dial('svc.gate.test:443', {
    proxy: parseProxyUrl(`http://dave:pw1234@${proxy.host}:${proxy.port}`),
    timeoutMs: 150,
  }).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  t.ok(isGateError(err, 'GATE_ERR_DIAL_TIMEOUT'));
  t.match(err?.message, `via http://dave:***@${proxy.host}:${proxy.port}`);
  t.notMatch(err?.message, /pw1234/);
  t.equal(timers(), before, 'no timer left behind');
  await proxy.closed();
  t.pass('the proxy saw the connection close');
});

t.test('an unreachable proxy is GATE_ERR_PROXY_UNREACHABLE', async (t) => {
  const port = await freePort('127.0.0.2');
  const err = await dial('svc.gate.test:443', { proxy: parseProxyUrl(`http://erin:zz9plural@127.0.0.2:${port}`) }).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  t.ok(isGateError(err, 'GATE_ERR_PROXY_UNREACHABLE'));
  t.match(err?.message, `127.0.0.2:${port}`);
  t.notMatch(err?.message, /zz9plural/);
});

t.test('abort mid-dial destroys the sockets; abort before start never connects', async (t) => {
  let received!: () => void;
  const gotRequest = new Promise<void>((resolve) => (received = resolve));
  const proxy = await startFakeProxy(t, () => received());
  const controller = new AbortController();
  const before = timers();
  const pending = dial('svc.gate.test:443', { proxy: parseProxyUrl(proxy.url), signal: controller.signal, timeoutMs: 60_000 });
  await gotRequest;
  controller.abort(new Error('user hit ^C'));
  await t.rejects(pending, { code: 'GATE_ERR_DIAL_ABORTED' });
  t.equal(timers(), before, 'the 60 s deadline timer is gone');
  await proxy.closed();
  t.pass('the proxy saw the connection close');
  const aborted = AbortSignal.abort();
  await t.rejects(dial('svc.gate.test:443', { proxy: parseProxyUrl(proxy.url), signal: aborted }), { code: 'GATE_ERR_DIAL_ABORTED' });
  t.equal(proxy.connections(), 1, 'an already-aborted signal opens nothing');
});

t.test('an https:// proxy: TLS to the proxy, CONNECT inside', async (t) => {
  const echo = await startEchoServer(t, { greeting: 'HI' });
  const proxy = await startFakeProxy(t, tunnelTo(echo.address, 'EARLY'), { tls: true });
  const { socket, via } = await dial('svc.gate.test:3024', {
    proxy: parseProxyUrl(proxy.url),
    proxyTls: { ca: devCertificates().ca.cert, servername: 'gate.test' },
  });
  t.equal(via?.scheme, 'https');
  t.equal(await readBytes(socket, 7), 'EARLYHI');
  socket.destroy();
  await t.rejects(dial('svc.gate.test:3024', { proxy: parseProxyUrl(proxy.url) }), { code: 'GATE_ERR_TLS_HANDSHAKE', message: /proxy/ });
});
