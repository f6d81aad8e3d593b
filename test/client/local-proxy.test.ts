import t from 'tap';
import { startMuteServer } from '../helpers/net.js';
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../lib/log.js';
import { parseProxyUrl } from '../../lib/client/proxy-config.js';
import { startLocalProxy, type LocalProxy } from '../../lib/client/local-proxy.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startTlsEchoServer } from '../helpers/echo-servers.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const ca = devCertificates().ca.cert;

/** Small seeded PRNG (mulberry32) so the payload is random-looking but the same every run. */
function seededBytes(seed: number, length: number): Buffer {
  let a = seed >>> 0;
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    out[i] = ((x ^ (x >>> 14)) >>> 0) & 0xff;
  }
  return out;
}

function clientTo(proxy: LocalProxy, allowHalfOpen = false): Promise<Socket> {
  const { address, port } = proxy.address();
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address, port, allowHalfOpen }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Collects everything until the peer ends the stream. */
function readAll(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
  });
}

function readN(socket: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (d: Buffer): void => {
      chunks.push(d);
      size += d.length;
      if (size >= n) {
        socket.removeListener('data', onData);
        resolve(Buffer.concat(chunks));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

function capture(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level: 'warn' }, stream) as unknown as Logger, lines };
}

t.test('plain TCP in, TLS with the route ALPN out: echo, many connections, 4 MiB both ways', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-postgres'] });
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: server.address,
    alpn: ['gate-postgres'],
    serverName: 'localhost',
    ca,
    env: {},
  });
  t.teardown(() => local.close());
  t.equal(local.address().address, '127.0.0.1');
  const clients = await Promise.all([1, 2, 3].map(() => clientTo(local)));
  const replies = await Promise.all(
    clients.map((c, i) => {
      c.write(`client ${i}`);
      return readN(c, `client ${i}`.length);
    }),
  );
  t.same(replies.map(String), ['client 0', 'client 1', 'client 2']);
  for (const c of clients) c.destroy();
  t.same(server.alpnSeen, ['gate-postgres', 'gate-postgres', 'gate-postgres']);

  const payload = seededBytes(42, 4 * 1024 * 1024);
  const big = await clientTo(local);
  const back = readN(big, payload.length);
  big.write(payload);
  const echoed = await back;
  t.equal(createHash('sha256').update(echoed).digest('hex'), createHash('sha256').update(payload).digest('hex'), 'echoed intact');
  big.destroy();
});

t.test('half-close: the client ends its side and still reads the answer', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-mysql'], mode: 'count' });
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: server.address,
    alpn: ['gate-mysql'],
    serverName: 'localhost',
    ca,
    env: {},
  });
  t.teardown(() => local.close());
  const client = await clientTo(local, true);
  const answer = readAll(client);
  client.end(Buffer.alloc(1000, 7));
  t.equal((await answer).toString(), 'got 1000 bytes');
});

t.test('through tinyproxy', async (t) => {
  const proxy = await startTinyproxy(t);
  if (!proxy) return;
  const server = await startTlsEchoServer(t, { alpn: ['gate-redis'] });
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: server.address,
    alpn: ['gate-redis'],
    serverName: 'localhost',
    ca,
    proxy: parseProxyUrl(proxy.url),
  });
  t.teardown(() => local.close());
  const client = await clientTo(local);
  client.write('PING\r\n');
  t.equal((await readN(client, 6)).toString(), 'PING\r\n');
  client.destroy();
  t.match(proxy.output(), /CONNECT 127\.0\.0\.1:\d+/, 'tinyproxy carried the tunnel');
});

t.test('a route that refuses our ALPN: the client is closed and the failure logged once', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-mongodb'] });
  const { logger, lines } = capture();
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: server.address,
    alpn: ['gate-postgres'],
    serverName: 'localhost',
    ca,
    env: {},
    logger,
  });
  t.teardown(() => local.close());
  const client = await clientTo(local);
  let received = 0;
  client.on('data', (d: Buffer) => (received += d.length));
  client.on('error', () => undefined); // unread bytes make the close a reset: either way is a close
  const closed = new Promise((resolve) => client.once('close', resolve));
  client.write('hello');
  await closed;
  t.equal(received, 0, 'closed without data');
  const warnings = lines.filter((l) => l.level === 40);
  t.equal(warnings.length, 1, 'one warning');
  t.equal(warnings[0]?.code, 'GATE_ERR_TLS_HANDSHAKE');
  t.equal(warnings[0]?.component, 'local-proxy');
});

t.test('close() stops accepting, ends open tunnels and pending dials, leaves no handles', async (t) => {
  const server = await startTlsEchoServer(t, { alpn: ['gate-postgres'] });
  const { address: muteAddress, held } = await startMuteServer(t);
  const handles = (): number =>
    process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap' || r === 'Timeout').length;
  const before = handles();
  const local = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: server.address,
    alpn: ['gate-postgres'],
    serverName: 'localhost',
    ca,
    env: {},
  });
  const stalled = await startLocalProxy({
    listen: { host: '127.0.0.1', port: 0 },
    target: muteAddress,
    alpn: ['gate-postgres'],
    serverName: 'localhost',
    ca,
    env: {},
  });
  const open = await clientTo(local);
  open.write('x');
  await readN(open, 1);
  const waiting = await clientTo(stalled);
  while (held.size < 1) await new Promise((resolve) => setImmediate(resolve));
  const port = local.address().port;
  const closedOpen = new Promise((resolve) => open.once('close', resolve));
  const closedWaiting = new Promise((resolve) => waiting.once('close', resolve));
  open.on('error', () => undefined);
  waiting.on('error', () => undefined);
  await Promise.all([local.close(), stalled.close()]);
  await Promise.all([closedOpen, closedWaiting]);
  t.pass('both clients were closed');
  await t.rejects(
    new Promise((resolve, reject) => connect({ host: '127.0.0.1', port }, () => resolve(undefined)).once('error', reject)),
    { code: 'ECONNREFUSED' },
    'no longer accepting',
  );
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(handles(), before, 'no sockets, servers or timers left');
});
