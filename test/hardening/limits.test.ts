/**
 * Every limit of the multiplexer, each ending a connection with its own code (docs/multiplexer.md
 * lists them): detection deadline, ClientHello cap, TLS handshake timeout, idle timeout, dial
 * timeout, max connections overall and per source address, a client FIN during detection.
 */
import t from 'tap';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { custom, forward, terminate } from '../../lib/handlers/builders.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import type { MultiplexerOptions, Route } from '../../lib/mux/types.js';
import { loadHelloFixtures } from '../fixtures/hello-fixtures.js';
import { closeServer, readUntil, startTaggedTcpServer, tcpClient, until } from '../helpers/net.js';
import { stalledListener } from './stalled-listener.js';
import { frame, handshake, helloBody, record } from '../tls/hello-builder.js';

const echo = await startTaggedTcpServer('ECHO');
t.teardown(() => closeServer(echo.server));
const hellos = loadHelloFixtures();
const chromium = hellos.find((h) => h.name === 'chromium')!;

const sshEcho: Route = { name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: echo.port }) };

async function withMux(options: Partial<MultiplexerOptions>, fn: (port: number, mux: Multiplexer) => Promise<void>): Promise<void> {
  const mux = new Multiplexer({ routes: [sshEcho], ...options });
  const { port } = await mux.listen({ port: 0 });
  try {
    await fn(port, mux);
  } finally {
    await mux.close({ graceMs: 50 });
  }
}

/** Writes `bytes`, waits for the multiplexer to close; returns what it sent back. */
async function closedAfter(port: number, bytes: Buffer | string, host = '127.0.0.1'): Promise<Buffer> {
  const socket = connect({ host: '127.0.0.1', port, localAddress: host });
  const chunks: Buffer[] = [];
  socket.on('data', (d: Buffer) => chunks.push(d));
  socket.on('error', () => {});
  socket.write(bytes);
  await once(socket, 'close');
  return Buffer.concat(chunks);
}

async function settled(mux: Multiplexer): Promise<Record<string, number>> {
  await until(() => mux.openConnections === 0, 'connections to settle');
  return mux.stats().failures;
}

t.test('ClientHello cap: a hello over maxHelloBytes gets decode_error, GATE_ERR_HELLO_TOO_LARGE', async (t) => {
  await withMux(
    {
      maxHelloBytes: 1024,
      routes: [{ name: 'tls', match: { protocol: 'tls' }, handler: forward({ host: '127.0.0.1', port: echo.port }) }],
    },
    async (port, mux) => {
      t.ok(chromium.handshakeLength > 1024, 'the chromium capture is over the cap');
      const answer = await closedAfter(port, chromium.bytes);
      t.same([...answer], [21, 3, 3, 0, 2, 2, 50], 'fatal decode_error alert');
      t.same(await settled(mux), { GATE_ERR_HELLO_TOO_LARGE: 1 });
      t.same(mux.stats().byRoute, {}, 'never routed');
    },
  );
});

t.test('bytes held in detection are bounded even in 1-byte TLS records', async (t) => {
  // A valid hello under the 1,024-byte cap (padded to ~990 bytes) sent one handshake byte per
  // record: 6 bytes on the wire per byte of hello, ~5.9 KB before it could end. The client stops
  // at 5,400 bytes: still undecided, over what may be held undecided (cap + 4 KiB record slack =
  // 5,120). Without the bound it would sit there until the 10 s detection deadline.
  const hello = handshake(helloBody({ extensions: [{ type: 21, data: Buffer.alloc(900) }] }));
  t.ok(hello.length > 900 && hello.length <= 1024, `a ${hello.length}-byte hello, under the cap`);
  const oneByteRecords = frame(hello, [1]);
  t.ok(oneByteRecords.length > 5400, `${oneByteRecords.length} bytes on the wire`);
  await withMux({ maxHelloBytes: 1024 }, async (port, mux) => {
    const answer = await closedAfter(port, oneByteRecords.subarray(0, 5400));
    t.same([...answer], [21, 3, 3, 0, 2, 2, 50], 'decode_error alert');
    t.same(await settled(mux), { GATE_ERR_HELLO_TOO_LARGE: 1 }, 'the held-bytes bound, not a parse error');
  });
  // The same hello in one record stays under the bound and is read to the end (no route takes
  // TLS here): the bound above is what the record framing cost, not the hello's size.
  await withMux({ maxHelloBytes: 1024 }, async (port, mux) => {
    await closedAfter(port, record(hello));
    t.same(await settled(mux), { GATE_ERR_NO_ROUTE: 1 });
  });
});

t.test('detection deadline: GATE_ERR_DETECT_TIMEOUT, and it does not leak into the routed life', async (t) => {
  await withMux({ detectTimeoutMs: 150 }, async (port, mux) => {
    await closedAfter(port, Buffer.from([0x16, 0x03, 0x01]));
    t.same(await settled(mux), { GATE_ERR_DETECT_TIMEOUT: 1 });
    const routed = await tcpClient(port);
    routed.write('SSH-2.0-long-lived\r\n');
    await readUntil(routed, (s) => s.includes('long-lived'));
    await new Promise((r) => setTimeout(r, 400)); // well past the detection deadline
    routed.write('still here');
    t.match(await readUntil(routed, (s) => s.includes('still here')), /still here/, 'routed connection outlives the deadline');
    routed.destroy();
    t.same(await settled(mux), { GATE_ERR_DETECT_TIMEOUT: 1 }, 'no second timeout');
  });
});

t.test('a client FIN during detection ends it at once with GATE_ERR_CLIENT_CLOSED', async (t) => {
  await withMux({ detectTimeoutMs: 60_000 }, async (port, mux) => {
    const socket = await tcpClient(port, { allowHalfOpen: true });
    socket.end(Buffer.from([0x16, 0x03]));
    await once(socket, 'end'); // the multiplexer closed its side long before the 60 s deadline
    socket.destroy();
    t.same(await settled(mux), { GATE_ERR_CLIENT_CLOSED: 1 });
  });
});

t.test('TLS handshake timeout on a terminated route: GATE_ERR_TLS_HANDSHAKE_TIMEOUT', async (t) => {
  const { server: pair } = devCertificates();
  const route: Route = {
    name: 'web',
    match: { protocol: 'tls' },
    handler: terminate(
      { ...pair, handshakeTimeoutMs: 200 },
      custom((s) => void s.end()),
    ),
  };
  await withMux({ routes: [route] }, async (port, mux) => {
    // A real hello, then silence: the server answers and waits for a client Finished that never comes.
    const answer = await closedAfter(port, hellos.find((h) => h.name === 'openssl-tls13-no-alpn')!.bytes);
    t.equal(answer[0], 0x16, 'the server did answer with its handshake');
    t.same(await settled(mux), { GATE_ERR_TLS_HANDSHAKE_TIMEOUT: 1 });
  });
});

t.test('idle timeout on a routed connection: GATE_ERR_IDLE_TIMEOUT', async (t) => {
  await withMux({ idleTimeoutMs: 150 }, async (port, mux) => {
    const socket = await tcpClient(port);
    socket.write('SSH-2.0-idle\r\n');
    await readUntil(socket, (s) => s.includes('idle'));
    await once(socket, 'close');
    t.same(await settled(mux), { GATE_ERR_IDLE_TIMEOUT: 1 });
  });
});

t.test('dial timeout to an upstream that never accepts: GATE_ERR_DIAL_TIMEOUT; refused: GATE_ERR_DIAL_REFUSED', async (t) => {
  const stalled = await stalledListener();
  t.teardown(stalled.close);
  const closedPort = await (async () => {
    const { port, server } = await startTaggedTcpServer('gone');
    await closeServer(server);
    return port;
  })();
  const routes: Route[] = [
    { name: 'stall', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: stalled.port }, { dialTimeoutMs: 200 }) },
    { name: 'refuse', match: { protocol: 'http1' }, handler: forward({ host: '127.0.0.1', port: closedPort }) },
  ];
  await withMux({ routes }, async (port, mux) => {
    await closedAfter(port, 'SSH-2.0-x\r\n');
    await closedAfter(port, 'GET / HTTP/1.1\r\n\r\n');
    t.same(await settled(mux), { GATE_ERR_DIAL_TIMEOUT: 1, GATE_ERR_DIAL_REFUSED: 1 });
  });
});

t.test('max connections overall: GATE_ERR_TOO_MANY_CONNECTIONS', async (t) => {
  await withMux({ maxConnections: 2 }, async (port, mux) => {
    const held = [await tcpClient(port), await tcpClient(port)];
    await closedAfter(port, 'SSH-2.0-third\r\n');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1);
    t.equal(mux.stats().rejected, 1);
    for (const s of held) s.destroy();
  });
});

t.test('max connections per source address: GATE_ERR_TOO_MANY_FROM_SOURCE; other addresses served', async (t) => {
  await withMux({ maxConnectionsPerSource: 2 }, async (port, mux) => {
    const held: Socket[] = [];
    for (let i = 0; i < 2; i++) {
      const s = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.5' });
      await once(s, 'connect');
      held.push(s);
    }
    await closedAfter(port, 'SSH-2.0-third\r\n', '127.0.0.5');
    t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_FROM_SOURCE, 1, 'third from 127.0.0.5 refused');
    const other = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.6' });
    other.write('SSH-2.0-other\r\n');
    t.match(await readUntil(other, (s) => s.includes('other')), /ECHO/, '127.0.0.6 is served');
    other.destroy();
    held.pop()!.destroy();
    await until(() => mux.openConnections === 1, 'a slot of 127.0.0.5 to free');
    const again = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.5' });
    again.write('SSH-2.0-again\r\n');
    t.match(await readUntil(again, (s) => s.includes('again')), /ECHO/, '127.0.0.5 is served again once under its limit');
    again.destroy();
    for (const s of held) s.destroy();
    t.same(
      await settled(mux),
      { GATE_ERR_TOO_MANY_FROM_SOURCE: 1, GATE_ERR_CLIENT_CLOSED: 2 },
      'the two held ones closed during detection',
    );
  });
});

t.test('failures keep their own code: a failed TLS handshake is GATE_ERR_TLS_HANDSHAKE, not a reset', async (t) => {
  const { server: pair } = devCertificates();
  const route: Route = {
    name: 'web',
    match: { protocol: 'tls' },
    handler: terminate(
      pair,
      custom((s) => void s.end()),
    ),
  };
  await withMux({ routes: [route] }, async (port, mux) => {
    // A client that does not trust the dev CA aborts the handshake with an alert.
    const { connect: tlsConnect } = await import('node:tls');
    const client = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost' });
    await once(client, 'error');
    client.destroy();
    t.same(await settled(mux), { GATE_ERR_TLS_HANDSHAKE: 1 });
  });
});

t.test('the held-bytes bound applies only while undecided: a greeting with 200 KB behind it is routed', async (t) => {
  await withMux({}, async (port, mux) => {
    const socket = await tcpClient(port);
    const body = Buffer.alloc(200 * 1024, 'x');
    socket.write(Buffer.concat([Buffer.from('SSH-2.0-pipelined\r\n'), body])); // one write, large first reads
    const echoed = await readUntil(socket, (s) => s.length >= 'ECHO\n'.length + 19 + body.length);
    t.equal(echoed.length, 'ECHO\n'.length + 19 + body.length, 'everything echoed');
    socket.destroy();
    t.same(await settled(mux), {}, 'no HELLO_TOO_LARGE');
  });
});
