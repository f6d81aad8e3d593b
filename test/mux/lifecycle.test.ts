import t from 'tap';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS, type TransportOptions } from '../helpers/transports.js';
import { once } from 'node:events';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import {
  closeServer,
  liveHandles,
  until,
  readBytes,
  readUntil,
  startTaggedTcpServer,
  tcpClient,
  tlsClient,
  startTaggedTlsServer,
} from '../helpers/net.js';

const echo = await startTaggedTcpServer('ECHO');
const tlsUp = await startTaggedTlsServer('T');
t.teardown(async () => {
  await closeServer(echo.server);
  await closeServer(tlsUp.server);
});

const routes = [
  { name: 'ssh', match: { protocol: 'ssh' as const }, handler: forward({ host: '127.0.0.1', port: echo.port }) },
  // A catch-all TLS route: malformed hellos must still never reach it.
  { name: 'any-tls', match: { protocol: 'tls' as const }, handler: forward({ host: '127.0.0.1', port: tlsUp.port }) },
];

// Every test runs twice: with passthrough on bare libuv handles (the default) and on net.Socket.
let transport: TransportOptions = TRANSPORT_OPTIONS.handles;

async function withMux(
  options: Partial<ConstructorParameters<typeof Multiplexer>[0]>,
  fn: (port: number, mux: Multiplexer) => Promise<void>,
): Promise<void> {
  const mux = new Multiplexer({ routes, ...transport, ...options });
  const { port } = await mux.listen({ port: 0 });
  try {
    await fn(port, mux);
  } finally {
    await mux.close({ graceMs: 50 });
  }
}

for (const name of availableTransports(t)) {
  t.test(`passthrough on ${TRANSPORT_LABEL[name]}`, async (t) => {
    transport = TRANSPORT_OPTIONS[name];
    t.test('a client that never decides is closed at the detection deadline', async (t) => {
      await withMux({ detectTimeoutMs: 150 }, async (port, mux) => {
        const socket = await tcpClient(port);
        socket.write(Buffer.from([0x16, 0x03, 0x01, 0x01])); // a TLS record header, then nothing
        await once(socket, 'close');
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.equal(mux.stats().failures.GATE_ERR_DETECT_TIMEOUT, 1);
        t.equal(mux.openConnections, 0);
      });
    });

    t.test('a client that resets during detection is counted as GATE_ERR_CLIENT_CLOSED', async (t) => {
      await withMux({}, async (port, mux) => {
        const socket = await tcpClient(port);
        socket.on('error', () => {});
        // A Postgres SSLRequest is answered 'S': once the client has the answer, the multiplexer has
        // read everything and waits for a ClientHello, so the reset fails its next read (a reset
        // racing unread bytes is reported as an EOF instead, a different path).
        socket.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
        t.equal(await readBytes(socket, 1), 'S');
        socket.resetAndDestroy();
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.same(mux.stats().failures, { GATE_ERR_CLIENT_CLOSED: 1 }, 'one failure, with the code the socket transport gives it');
        t.equal(mux.stats().rejected, 0, 'not a reset caught at accept');
      });
    });

    t.test('a malformed ClientHello gets a decode_error alert and is never routed', async (t) => {
      await withMux({}, async (port, mux) => {
        const socket = await tcpClient(port);
        // Record says 9 bytes of handshake; handshake says client_hello of length 5 with garbage.
        socket.write(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x09, 0x01, 0x00, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff]));
        const chunks: Buffer[] = [];
        socket.on('data', (d: Buffer) => chunks.push(d));
        await once(socket, 'close');
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.same([...Buffer.concat(chunks)], [21, 3, 3, 0, 2, 2, 50], 'fatal decode_error alert');
        t.notOk(mux.stats().byRoute['any-tls'], 'catch-all route never used');
        t.equal(mux.stats().failures.GATE_ERR_HELLO_MALFORMED, 1);
      });
    });

    t.test('unknown first bytes are closed with GATE_ERR_UNKNOWN_PROTOCOL', async (t) => {
      await withMux({}, async (port, mux) => {
        const socket = await tcpClient(port);
        socket.write('\x00\x01garbage that is no protocol\r\n');
        await once(socket, 'close');
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.equal(mux.stats().failures.GATE_ERR_UNKNOWN_PROTOCOL, 1);
      });
    });

    t.test('a PROXY header is refused when PROXY protocol is off', async (t) => {
      await withMux({}, async (port, mux) => {
        const socket = await tcpClient(port);
        socket.write('PROXY TCP4 192.0.2.1 192.0.2.2 1000 443\r\nSSH-2.0-x\r\n');
        await once(socket, 'close');
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.equal(mux.stats().failures.GATE_ERR_PROXY_HEADER_REFUSED, 1);
        t.notOk(mux.stats().byRoute.ssh);
      });
    });

    t.test('max connections: the one over the limit is closed at once, the others are served', async (t) => {
      await withMux({ maxConnections: 2 }, async (port, mux) => {
        const a = await tcpClient(port);
        const b = await tcpClient(port);
        const c = await tcpClient(port);
        await once(c, 'close');
        await until(() => mux.stats().rejected === 1, 'the rejection to be counted');
        t.equal(mux.stats().rejected, 1);
        t.equal(mux.stats().failures.GATE_ERR_TOO_MANY_CONNECTIONS, 1);
        a.write('SSH-2.0-a\r\n');
        t.match(await readUntil(a, (s) => s.includes('SSH-2.0-a')), /ECHO/);
        a.destroy();
        b.destroy();
      });
    });

    t.test('idle timeout closes a routed connection that carries nothing', async (t) => {
      await withMux({ idleTimeoutMs: 150 }, async (port, mux) => {
        const socket = await tcpClient(port);
        socket.write('SSH-2.0-idle\r\n');
        await readUntil(socket, (s) => s.includes('SSH-2.0-idle'));
        await once(socket, 'close');
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.equal(mux.stats().failures.GATE_ERR_IDLE_TIMEOUT, 1);
      });
    });

    t.test('setRoutes (a reload): an established connection keeps its upstream, a new one follows the new route', async (t) => {
      const other = await startTaggedTcpServer('OTHER');
      t.teardown(async () => {
        for (const socket of other.sockets) socket.destroy();
        await closeServer(other.server);
      });
      await withMux({}, async (port, mux) => {
        const before = await tcpClient(port);
        before.write('SSH-2.0-before\r\n');
        t.match(await readUntil(before, (s) => s.includes('SSH-2.0-before')), /^ECHO\n/);
        mux.setRoutes([{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: other.port }) }, routes[1]!]);
        const after = await tcpClient(port);
        after.write('SSH-2.0-after\r\n');
        t.match(await readUntil(after, (s) => s.includes('SSH-2.0-after')), /^OTHER\n/, 'a new connection follows the new route');
        before.write('still flowing');
        t.match(
          await readUntil(before, (s) => s.includes('still flowing')),
          /still flowing/,
          'the established connection kept its upstream',
        );
        before.destroy();
        after.destroy();
        await until(() => mux.openConnections === 0, 'connections to settle');
        t.same(mux.stats().failures, {}, 'no failure on either side of the reload');
      });
    });

    t.test('the upstream half-closes first; the client can still send and receive the echo', async (t) => {
      // Upstream that sends a line and FINs at once, then keeps reading and logs what it got.
      const { createServer } = await import('node:net');
      const got: string[] = [];
      const upstream = createServer({ allowHalfOpen: true }, (s) => {
        s.end('bye\n');
        let text = '';
        s.on('data', (d) => (text += d));
        s.on('end', () => got.push(text));
      });
      upstream.listen(0, '127.0.0.1');
      await once(upstream, 'listening');
      const mux = new Multiplexer({
        routes: [
          {
            name: 'ssh',
            match: { protocol: 'ssh' },
            handler: forward({ host: '127.0.0.1', port: (upstream.address() as { port: number }).port }),
          },
        ],
        ...transport,
      });
      const { port } = await mux.listen({ port: 0 });
      const socket = await tcpClient(port, { allowHalfOpen: true });
      socket.write('SSH-2.0-late\r\n');
      t.equal(await readUntil(socket, () => false), 'bye\n', 'client saw the upstream FIN');
      socket.end('after upstream FIN');
      await once(socket, 'close');
      await mux.close({ graceMs: 100 });
      await closeServer(upstream);
      t.same(got, ['SSH-2.0-late\r\nafter upstream FIN'], 'bytes sent after the upstream FIN still arrived');
    });

    t.test('close(): stops accepting, destroys what is left after the grace period, leaks nothing', async (t) => {
      const mux = new Multiplexer({ routes, ...transport });
      const { port } = await mux.listen({ port: 0 });
      const routed = await tcpClient(port);
      routed.write('SSH-2.0-stay\r\n');
      await readUntil(routed, (s) => s.includes('SSH-2.0-stay'));
      const detecting = await tcpClient(port); // still in detection
      const tlsSocket = await tlsClient(port, { servername: 'localhost' });
      await readUntil(tlsSocket, (s) => s.includes('\n'));
      t.equal(mux.openConnections, 3);
      const closed = mux.close({ graceMs: 200 });
      const refused = await tcpClient(port).then(
        () => false,
        () => true,
      );
      t.ok(refused, 'no new connections once closing');
      await Promise.all([closed, once(routed, 'close'), once(detecting, 'close'), once(tlsSocket, 'close')]);
      t.equal(mux.openConnections, 0);
      t.equal(mux.stats().failures.GATE_ERR_SHUTDOWN, 3, 'each leftover connection ended with SHUTDOWN');
      await new Promise((r) => setImmediate(r));
      // What remains is this file's two upstream servers; earlier tests' sockets are gone by now too.
      await until(() => liveHandles().sockets === 0, 'sockets to close');
      const after = liveHandles();
      t.equal(after.servers, 2, 'the multiplexer listener is gone (only the test upstreams remain)');
      t.equal(after.timers, 0, 'no timer left');
    });

    t.test('close() resolves early when connections finish within the grace period', async (t) => {
      const mux = new Multiplexer({ routes, ...transport });
      const { port } = await mux.listen({ port: 0 });
      const socket = await tcpClient(port);
      socket.write('SSH-2.0-bye\r\n');
      await readUntil(socket, (s) => s.includes('SSH-2.0-bye'));
      const closed = mux.close({ graceMs: 60_000 });
      socket.end();
      await closed; // would hang for a minute (tap timeout) if draining did not resolve it
      t.equal(mux.stats().failures.GATE_ERR_SHUTDOWN, undefined, 'finished on its own, not forced');
    });
  });
}
