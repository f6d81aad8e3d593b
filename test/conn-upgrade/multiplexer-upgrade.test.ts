// The connection upgrade mounted on a Multiplexer user's own web route (the library API): the
// multiplexer's web route terminates TLS with a "load balancer" certificate from a CA of its own
// and serves HTTPS; the upgrade handler there hands the WebSocket's byte stream back to the same
// multiplexer, where the inner TLS (the cluster CA, the client's real SNI and ALPN, its client
// certificate) is routed like any connection on the port. Hostile upgrades end with a code.
import t from 'tap';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { once } from 'node:events';
import type { Duplex } from 'node:stream';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, serve, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { CertificateAuthority } from '../../lib/pki/certificate-authority.js';
import { ConnectionUpgrade } from '../../lib/conn-upgrade/upgrade-server.js';
import { dialTls } from '../../lib/client/dial-tls.js';
import { ErrorCodes } from '../../lib/errors.js';
import type { ConnectionInfo } from '../../lib/handlers/types.js';
import { liveHandles, readUntil, until } from '../helpers/net.js';
import { clientFrame, closeCode, failureLogger, Opcode, rawUpgrade, readFrames } from '../helpers/conn-upgrade.js';

const { ca: clusterCa, server: clusterServer, client: clusterClient } = devCertificates();
const lbCa = CertificateAuthority.create();
const lbPair = lbCa.issue({ commonName: 'lb.test', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });

const seen: ConnectionInfo[] = [];
const { logger, failures } = failureLogger();

const web = createHttpsServer({ ...lbPair }, (_req, res) => res.end('web\n'));
const mux = new Multiplexer({
  logger,
  detectTimeoutMs: 800,
  routes: [
    {
      name: 'echo',
      match: { alpn: 'x-echo' },
      handler: terminate(
        { ...clusterServer, ca: clusterCa.cert, requestCert: true, alpnProtocols: ['x-echo'] },
        custom((socket: Duplex, info) => {
          seen.push({ ...info });
          socket.pipe(socket);
        }),
      ),
    },
    { name: 'web', match: { protocol: ['tls', 'http1'] }, handler: serve(web) },
  ],
});
const upgrade = new ConnectionUpgrade({ target: mux, logger, maxMessageBytes: 32 * 1024 });
upgrade.attach(web);
const { port } = await mux.listen({ host: '127.0.0.1', port: 0 });
const target = `127.0.0.1:${port}`;
const tlsToLb = { ca: lbCa.cert, servername: 'localhost' };

t.teardown(async () => {
  upgrade.close();
  await mux.close({ graceMs: 200 });
});

t.test('a TLS stream inside the upgrade is routed by its own ALPN and client certificate', async (t) => {
  const { socket, upgraded, alpn } = await dialTls(target, {
    alpn: ['x-echo'],
    requireAlpn: true,
    serverName: 'gate.test',
    ca: clusterCa.cert,
    ...clusterClient,
    connectionUpgrade: { mode: true, loadBalancerCa: lbCa.cert },
    proxy: null,
  });
  t.ok(upgraded, 'the dial went through the upgrade');
  t.equal(alpn, 'x-echo');
  t.ok(socket.getPeerCertificate().subject, 'the inner TLS checked the cluster CA');
  socket.write('hello through the upgrade');
  t.equal(await readUntil(socket, (s) => s.includes('upgrade')), 'hello through the upgrade');
  const big = Buffer.alloc(256 * 1024, 7); // many messages, split under the limit
  socket.write(big);
  let got = 0;
  await new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => {
      got += c.length;
      if (got >= big.length) resolve();
    });
    socket.resume(); // readUntil left it paused
  });
  t.equal(got, big.length, 'bulk bytes echoed whole');
  const info = seen.at(-1)!;
  t.equal(info.route, 'echo');
  t.equal(info.sni, 'gate.test', 'the inner SNI, not the outer one');
  t.same(info.alpn, ['x-echo']);
  t.equal(info.remote.address, '127.0.0.1', 'recorded: the address the upgrade came from');
  socket.end();
  await until(() => mux.stats().byRoute.echo?.open === 0, 'the carried connection to end');
  t.equal(upgrade.counts.upgraded >= 1, true);
});

t.test('the library dialer detects nothing to upgrade when TLS reaches the multiplexer', async (t) => {
  const { socket, upgraded } = await dialTls(target, {
    alpn: ['x-echo'],
    requireAlpn: true,
    serverName: 'gate.test',
    ca: clusterCa.cert,
    ...clusterClient,
    proxy: null,
  });
  t.notOk(upgraded);
  socket.destroy();
});

t.test('hostile upgrade requests are refused with a status and GATE_ERR_CONN_UPGRADE_REFUSED', async (t) => {
  const cases: Array<[string, Parameters<typeof rawUpgrade>[0]['headers'], number, string?]> = [
    ['missing key', { 'Sec-WebSocket-Key': undefined }, 400],
    ['malformed key', { 'Sec-WebSocket-Key': 'c2hvcnQ=' }, 400],
    ['unknown sub-protocol', { 'Sec-WebSocket-Protocol': 'chat, superchat' }, 400],
    ['no sub-protocol', { 'Sec-WebSocket-Protocol': undefined }, 400],
    ['old version', { 'Sec-WebSocket-Version': '8' }, 426],
    ['not an upgrade', { Connection: 'keep-alive, Upgrade', Upgrade: 'h2c' }, 400],
  ];
  for (const [what, headers, status] of cases) {
    const r = await rawUpgrade({ port, tls: tlsToLb, headers });
    t.equal(r.status, status, `${what}: ${status}`);
    t.match(r.rest.toString(), /GATE_ERR_CONN_UPGRADE_REFUSED/, `${what}: the body names the code`);
    r.socket.destroy();
  }
  const post = await rawUpgrade({ port, tls: tlsToLb, method: 'POST' });
  t.equal(post.status, 405, 'POST: 405');
  post.socket.destroy();
  const other = await rawUpgrade({ port, tls: tlsToLb, path: '/elsewhere' });
  t.equal(other.status, 404, 'another path: 404');
  other.socket.destroy();
});

t.test('an upgrade that never sends a frame ends at the detection deadline', async (t) => {
  const before = mux.stats().failures[ErrorCodes.DETECT_TIMEOUT] ?? 0;
  const r = await rawUpgrade({ port, tls: tlsToLb });
  t.equal(r.status, 101);
  t.not(await closeCode(r.socket, r.rest), 'stalled', 'the proxy ended the WebSocket');
  await until(() => (mux.stats().failures[ErrorCodes.DETECT_TIMEOUT] ?? 0) > before, 'the carried connection to time out');
  t.pass('GATE_ERR_DETECT_TIMEOUT counted');
});

t.test('a text message fails the connection with 1003 and GATE_ERR_CONN_UPGRADE_MESSAGE', async (t) => {
  const before = mux.stats().failures[ErrorCodes.CONN_UPGRADE_MESSAGE] ?? 0;
  const r = await rawUpgrade({ port, tls: tlsToLb });
  r.socket.write(clientFrame(Opcode.text, Buffer.from('hello')));
  t.equal(await closeCode(r.socket, r.rest), 1003);
  await until(() => (mux.stats().failures[ErrorCodes.CONN_UPGRADE_MESSAGE] ?? 0) > before, 'the failure to be counted');
});

t.test('a message over the limit, whole or in fragments, is closed with 1009', async (t) => {
  const whole = await rawUpgrade({ port, tls: tlsToLb });
  whole.socket.write(clientFrame(Opcode.binary, Buffer.alloc(40_000)));
  t.equal(await closeCode(whole.socket, whole.rest), 1009, 'one frame of 40 000 bytes');
  const parts = await rawUpgrade({ port, tls: tlsToLb });
  for (let i = 0; i < 5; i++) parts.socket.write(clientFrame(i === 0 ? Opcode.binary : Opcode.continuation, Buffer.alloc(8000), false));
  t.equal(await closeCode(parts.socket, parts.rest), 1009, 'five fragments of 8000 bytes, never finished');
});

t.test('fragments under the limit are one message: detection judges them joined', async (t) => {
  const r = await rawUpgrade({ port, tls: tlsToLb });
  // A greeting that is no protocol, split in three: detection sees the bytes joined (and refuses them by content).
  const before = mux.stats().failures[ErrorCodes.UNKNOWN_PROTOCOL] ?? 0;
  r.socket.write(clientFrame(Opcode.binary, Buffer.from('NOT'), false));
  r.socket.write(clientFrame(Opcode.continuation, Buffer.from('-A-'), false));
  r.socket.write(clientFrame(Opcode.continuation, Buffer.from('PROTOCOL\r\n'), true));
  t.not(await closeCode(r.socket, r.rest), 'stalled', 'the proxy ended the WebSocket');
  await until(() => (mux.stats().failures[ErrorCodes.UNKNOWN_PROTOCOL] ?? 0) > before, 'the joined message to be judged');
  t.pass('detection judged the reassembled message');
});

t.test('a flood of upgrades from one source is bounded by maxConnectionsPerSource', async (t) => {
  mux.setOptions({ detectTimeoutMs: 800, maxConnectionsPerSource: 6 });
  t.teardown(() => mux.setOptions({ detectTimeoutMs: 800 }));
  const before = mux.stats().failures[ErrorCodes.TOO_MANY_FROM_SOURCE] ?? 0;
  const held = [];
  let refused = 0;
  for (let i = 0; i < 8; i++) {
    try {
      const r = await rawUpgrade({ port, tls: tlsToLb });
      if (r.status === 101) held.push(r);
      else refused++;
    } catch {
      refused++;
    }
  }
  t.ok(held.length <= 3, `at most 3 upgrades held (each is two connections: the HTTPS one and the one it carries): ${held.length}`);
  t.ok(refused > 0, `the rest refused: ${refused}`);
  t.ok((mux.stats().failures[ErrorCodes.TOO_MANY_FROM_SOURCE] ?? 0) > before, 'GATE_ERR_TOO_MANY_FROM_SOURCE counted');
  for (const r of held) r.socket.destroy();
  await until(() => mux.openConnections === 0, 'every connection to end', 5000);
});

t.test('from trusted networks, X-Forwarded-For names the client: exactly one address', async (t) => {
  upgrade.setOptions({ maxMessageBytes: 32 * 1024, trustedNetworks: ['127.0.0.0/8'] });
  t.teardown(() => upgrade.setOptions({ maxMessageBytes: 32 * 1024 }));
  const r = await rawUpgrade({ port, tls: tlsToLb, headers: { 'X-Forwarded-For': '203.0.113.9' } });
  t.equal(r.status, 101);
  r.socket.write(clientFrame(Opcode.binary, Buffer.from('NOT-A-PROTOCOL\r\n')));
  t.not(await closeCode(r.socket, r.rest), 'stalled');
  await until(
    () => failures.some((f) => f.code === ErrorCodes.UNKNOWN_PROTOCOL && f.remote === '203.0.113.9'),
    'the failure logged with the forwarded client',
  );
  const two = await rawUpgrade({ port, tls: tlsToLb, headers: { 'X-Forwarded-For': '198.51.100.1, 203.0.113.9' } });
  t.equal(two.status, 400, 'two addresses: refused');
  t.match(two.rest.toString(), /exactly one/);
  two.socket.destroy();
  const none = await rawUpgrade({ port, tls: tlsToLb });
  t.equal(none.status, 400, 'none from a trusted balancer: refused');
  none.socket.destroy();
  upgrade.setOptions({ maxMessageBytes: 32 * 1024 });
  const untrusted = await rawUpgrade({ port, tls: tlsToLb, headers: { 'X-Forwarded-For': '203.0.113.9, 198.51.100.1' } });
  t.equal(untrusted.status, 101, 'from anywhere else the header is ignored');
  untrusted.socket.destroy();
});

t.test('alpn-ping: the proxy pings a quiet stream within the interval', async (t) => {
  upgrade.setOptions({ maxMessageBytes: 32 * 1024, pingIntervalMs: 200 });
  t.teardown(() => upgrade.setOptions({ maxMessageBytes: 32 * 1024 }));
  const r = await rawUpgrade({ port, tls: tlsToLb, headers: { 'Sec-WebSocket-Protocol': 'alpn-ping' } });
  t.match(r.head, /Sec-WebSocket-Protocol: alpn-ping/i);
  const started = Date.now();
  const got = await readFrames(r.socket, r.rest, (opcode) => (opcode === Opcode.ping ? Date.now() - started : undefined), 1000, true);
  t.type(got, 'number', 'a ping frame arrived');
  t.ok(typeof got === 'number' && got < 1000, `within 1 s of a 200 ms interval (${String(got)} ms)`);
  // This client never answers: the ping after next finds the first unanswered, before the detection deadline.
  await until(
    () => (mux.stats().failures[ErrorCodes.CONN_UPGRADE_PING_TIMEOUT] ?? 0) > 0,
    'an unanswered ping to end the connection',
    2000,
  );
  r.socket.destroy();
  const plain = await rawUpgrade({ port, tls: tlsToLb });
  const none = await readFrames(plain.socket, plain.rest, (opcode) => (opcode === Opcode.ping ? true : undefined), 600);
  t.equal(none, 'stalled', 'alpn (no -ping): no pings');
});

t.test('a refused upgrade is GATE_ERR_CONN_UPGRADE_REFUSED with the status; auto mode then reports the direct failure', async (t) => {
  // An HTTPS server whose upgrade has nowhere to carry streams: every upgrade is answered 503.
  const lonely = createHttpsServer({ ...lbPair });
  const refusing = new ConnectionUpgrade({ target: () => undefined });
  refusing.attach(lonely);
  await new Promise<void>((resolve) => lonely.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => lonely.close(() => resolve())));
  const at = `127.0.0.1:${(lonely.address() as import('node:net').AddressInfo).port}`;
  const dialing = { alpn: ['x-echo'], requireAlpn: true, serverName: 'gate.test', ca: clusterCa.cert, proxy: null };
  await t.rejects(dialTls(at, { ...dialing, connectionUpgrade: { mode: true, loadBalancerCa: lbCa.cert } }), {
    code: ErrorCodes.CONN_UPGRADE_REFUSED,
    message: /HTTP 503/,
  });
  // Auto: the direct handshake fails on the balancer's certificate, the test handshake says the
  // path ends TLS, the upgrade is refused: the error is still the direct handshake's.
  await t.rejects(dialTls(at, { ...dialing, connectionUpgrade: { loadBalancerCa: lbCa.cert } }), { code: ErrorCodes.TLS_HANDSHAKE });
  t.equal(refusing.counts.refused, 2, 'both reached the upgrade');
});

t.test('after every hostile upgrade: no connection, socket or timer left', async (t) => {
  await until(() => mux.openConnections === 0, 'every carried and carrying connection to end', 5000);
  // The listener and the test's own HTTPS server are the only handles expected; the log limiter's
  // summary timer goes with upgrade.close() (teardown).
  upgrade.close();
  await until(() => liveHandles().sockets === 0, 'sockets to close', 5000);
  t.equal(liveHandles().sockets, 0, 'no socket left');
  await until(() => liveHandles().timers === 0, 'timers to end', 5000);
  t.equal(liveHandles().timers, 0, 'no timer left (pings, idle timers, close timers, deadlines)');
});

t.test('a closed upgrade refuses new requests with 503 and the code, and counts them', async (t) => {
  const plain = createHttpServer((_req, res) => res.end('web\n'));
  const closed = new ConnectionUpgrade({ target: mux, logger });
  closed.attach(plain);
  plain.listen(0, '127.0.0.1');
  await once(plain, 'listening');
  t.teardown(() => plain.close());
  const before = mux.openConnections;
  const open = await rawUpgrade({ port: (plain.address() as { port: number }).port });
  t.equal(open.status, 101, 'answered while open');
  open.socket.destroy();
  await closed.close();
  const late = await rawUpgrade({ port: (plain.address() as { port: number }).port });
  t.equal(late.status, 503, 'refused once closed');
  t.match(late.rest.toString(), /GATE_ERR_CONN_UPGRADE_REFUSED/);
  late.socket.destroy();
  t.equal(closed.counts.upgraded, 1);
  t.equal(closed.counts.refusedByStatus['503'], 1);
  await until(() => mux.openConnections === before, 'the one carried stream ended');
});
