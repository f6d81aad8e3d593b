// The forward relay end to end: bytes arrive exact and in order both ways, a slow reader on one
// side stops the other side's sender (backpressure through the router), and each direction ends
// on its own. Guards the relay's buffer reuse: a buffer overwritten under a pending write would
// corrupt the stream only when writes are partial, i.e. exactly when a reader is slow.
import t from 'tap';
import { availableTransports, TRANSPORT_LABEL, TRANSPORT_OPTIONS, type TransportOptions } from '../helpers/transports.js';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { Multiplexer } from '../../lib/mux/multiplexer.js';
import { forward } from '../../lib/handlers/builders.js';
import { closeServer, listening, tcpClient, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { payload } from '../helpers/relay-checks.js';

const GREETING = Buffer.from('SSH-2.0-relay-test\r\n');
const MiB = 1 << 20;

/** Writes `chunks` honouring backpressure; counts what the socket accepted; ends after the last. */
function send(socket: Socket, chunks: Buffer[], progress: { sent: number; blocked: boolean }): void {
  let i = 0;
  const pump = (): void => {
    progress.blocked = false;
    while (i < chunks.length) {
      const chunk = chunks[i++]!;
      progress.sent += chunk.length;
      if (!socket.write(chunk)) {
        progress.blocked = true;
        socket.once('drain', pump);
        return;
      }
    }
    socket.end();
  };
  pump();
}

/** Hashes what `socket` delivers until its end; `stutter` pauses it now and then (seeded). */
function digest(socket: Socket, skip = 0, stutter?: ReturnType<typeof prng>): Promise<{ sha: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  let toSkip = skip;
  socket.on('data', (chunk: Buffer) => {
    if (stutter?.chance(0.05)) {
      // A reader that keeps falling behind makes the router's writes to it partial, over and over.
      socket.pause();
      setTimeout(() => socket.resume(), stutter.range(1, 5));
    }
    if (toSkip > 0) {
      const n = Math.min(toSkip, chunk.length);
      toSkip -= n;
      chunk = chunk.subarray(n);
    }
    bytes += chunk.length;
    hash.update(chunk);
  });
  return once(socket, 'end').then(() => ({ sha: hash.digest('hex'), bytes }));
}

/** Waits until `progress` is blocked and has not moved for a few polls (bounded). */
async function stalled(progress: { sent: number; blocked: boolean }): Promise<void> {
  let last = -1;
  let still = 0;
  await until(
    () => {
      if (progress.blocked && progress.sent === last) still++;
      else still = 0;
      last = progress.sent;
      return still >= 20;
    },
    'the sender to stall',
    20_000,
  );
}

// Every test runs twice: with passthrough on bare libuv handles (the default) and on net.Socket.
let transport: TransportOptions = TRANSPORT_OPTIONS.handles;

async function setup(t: { teardown(fn: () => Promise<void>): void }, onUpstream: (socket: Socket) => void): Promise<number> {
  const upstream = createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    onUpstream(s);
  });
  const upstreamPort = await listening(upstream);
  const mux = new Multiplexer({
    routes: [{ name: 'ssh', match: { protocol: 'ssh' }, handler: forward({ host: '127.0.0.1', port: upstreamPort }) }],
    ...transport,
  });
  const { port } = await mux.listen({ port: 0 });
  t.teardown(async () => {
    await mux.close({ graceMs: 100 });
    await closeServer(upstream);
  });
  return port;
}

for (const name of availableTransports(t)) {
  t.test(`relay on ${TRANSPORT_LABEL[name]}`, async (t) => {
    transport = TRANSPORT_OPTIONS[name];
    t.test('bytes arrive exact both ways to stuttering readers, each direction ending on its own', async (t) => {
      const down = payload(1, 24 * MiB);
      const up = payload(2, 6 * MiB);
      let received: Promise<{ sha: string; bytes: number }> | undefined;
      const port = await setup(t, (s) => {
        received = digest(s, 0, prng(6));
        send(s, down.chunks, { sent: 0, blocked: false });
      });
      const client = await tcpClient(port, { allowHalfOpen: true });
      const got = digest(client, 0, prng(5));
      client.write(GREETING);
      // Bytes beyond the greeting before the routing decision would count against the detection
      // cap; once the upstream is dialed, the relay carries everything.
      await until(() => received !== undefined, 'the upstream connection');
      send(client, up.chunks, { sent: 0, blocked: false });
      const seen = await got;
      t.equal(seen.bytes, 24 * MiB, 'client got every byte');
      t.equal(seen.sha, down.sha, 'client got the upstream bytes in order');
      const upSeen = await received!;
      t.equal(upSeen.bytes, GREETING.length + 6 * MiB, 'upstream got greeting and every byte');
      const expected = createHash('sha256').update(GREETING);
      for (const c of up.chunks) expected.update(c);
      const seenWithGreeting = upSeen.sha;
      t.equal(seenWithGreeting, expected.digest('hex'), 'upstream got the client bytes in order');
      await once(client, 'close');
    });

    t.test('a client that stops reading stops the upstream sender; nothing is lost once it reads', async (t) => {
      const total = 96 * MiB;
      const down = payload(3, total);
      const progress = { sent: 0, blocked: false };
      const port = await setup(t, (s) => {
        s.resume();
        send(s, down.chunks, progress);
      });
      const client = await tcpClient(port);
      client.pause();
      client.write(GREETING);
      await stalled(progress);
      // Kernel buffers on both legs plus the router's write queue hold a few MiB at most; without
      // backpressure the router would read the whole transfer into memory and the sender would finish.
      t.ok(progress.sent < total / 2, `sender blocked after ${(progress.sent / MiB).toFixed(1)} MiB of ${total / MiB}`);
      const got = digest(client);
      client.resume();
      const seen = await got;
      t.equal(seen.bytes, total, 'every byte arrived after the client resumed');
      t.equal(seen.sha, down.sha, 'in order');
    });

    t.test('an upstream that stops reading stops the client sender; nothing is lost once it reads', async (t) => {
      const total = 96 * MiB;
      const up = payload(4, total);
      let upstreamSocket: Socket | undefined;
      const port = await setup(t, (s) => {
        upstreamSocket = s;
        s.pause();
      });
      const client = await tcpClient(port, { allowHalfOpen: true });
      client.write(GREETING);
      await until(() => upstreamSocket !== undefined, 'the upstream connection');
      const progress = { sent: 0, blocked: false };
      send(client, up.chunks, progress);
      await stalled(progress);
      t.ok(progress.sent < total / 2, `sender blocked after ${(progress.sent / MiB).toFixed(1)} MiB of ${total / MiB}`);
      const got = digest(upstreamSocket!, GREETING.length);
      upstreamSocket!.resume();
      const seen = await got;
      t.equal(seen.bytes, total, 'every byte arrived after the upstream resumed');
      t.equal(seen.sha, up.sha, 'in order');
      upstreamSocket!.end();
      await once(client, 'close');
    });
  });
}
