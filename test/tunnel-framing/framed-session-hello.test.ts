// Each side's HELLO (docs/tunnel-framing.md, "Opening"): it tells the other side the windows and
// the stream limit it gives, and a sender spends only that. Two real sessions over loopback TCP,
// configured with different windows; and a raw socket for the rules on the HELLO itself.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import { FramedSession, type FramedSessionOptions } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import {
  controlFrame,
  decodeGoAway,
  decodeHello,
  FrameType,
  type GoAwayPayload,
  type HelloPayload,
  helloFrame,
  WireError,
} from '../../lib/tunnel-framing/frames.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { listening, until } from '../helpers/net.js';

/** The agent's end (dialer, answers opens) and the proxy's (listener, opens), each with its own options. */
async function pair(t: Test, answererOptions: Partial<FramedSessionOptions>, openerOptions: Partial<FramedSessionOptions>) {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  const answerer = new FramedSession(client, { side: 'dialer', onOpen: (stream) => echoFramed(stream), ...answererOptions });
  const opener = new FramedSession(socket, { side: 'listener', ...openerOptions });
  const errors: Array<GateError | undefined> = [];
  answerer.on('close', (error: GateError | undefined) => errors.push(error));
  opener.on('close', (error: GateError | undefined) => errors.push(error));
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  return { opener, answerer, errors };
}

function patterned(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 13) % 251;
  return bytes;
}

function collect(stream: FramedStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(Buffer.from(chunk)));
  stream.resume();
  return once(stream, 'end').then(() => Buffer.concat(chunks));
}

const SMALL = { streamWindow: 8 * 1024, connectionWindow: 16 * 1024 };
const LARGE = { streamWindow: 512 * 1024, connectionWindow: 2 << 20 };

t.test('two sessions with different windows: each learns the other’s, and 2 MiB cross both ways with no FLOW_CONTROL_ERROR', async (t) => {
  // Before the HELLO, the large side assumed its own windows for the other's: its first 64 KiB
  // frame to the small side broke the small side's 8 KiB credit.
  const { opener, answerer, errors } = await pair(t, SMALL, { ...LARGE, maxConcurrentStreams: 7 });
  const stream = opener.open({ kind: 0, target: 'db.internal:5432', client: '' });
  const sent = patterned(2 << 20);
  const echoed = collect(stream);
  stream.write(sent);
  stream.end();
  t.ok((await echoed).equals(sent), 'the echo came back whole and in order');
  t.same(opener.peerLimits, { ...SMALL, maxStreams: 1000 }, 'the opener learnt the answerer’s windows and its stream limit');
  t.same(answerer.peerLimits, { ...LARGE, maxStreams: 0 }, 'the answerer learnt the opener’s windows; it takes no streams');
  await until(() => stream.closed, 'the stream closed');
  t.equal(stream.closeCode, undefined, 'closed clean: both FINs');
  t.same(errors, [], 'neither session ended');
});

t.test('a side with a small window is sent no more than it: the writer waits until the paused stream is read', async (t) => {
  const held: FramedStream[] = [];
  const { opener, errors } = await pair(
    t,
    {
      ...SMALL,
      onOpen: (stream) => {
        stream.respond({ status: 200, code: '', reason: '' });
        held.push(stream);
      },
    },
    LARGE,
  );
  const stream = opener.open({ kind: 0, target: 'db.internal:5432', client: '' });
  let drained = false;
  stream.on('drain', () => (drained = true));
  t.notOk(stream.write(Buffer.alloc(100_000, 1)), 'past the 8 KiB the answerer advertised: the writer waits');
  await until(() => held.length === 1, 'the open');
  const [answered] = held;
  let received = 0;
  answered!.on('data', (chunk: Buffer) => (received += chunk.length));
  // Never resumed: what it holds is what the opener sent, and that is the advertised window.
  await until(() => stream.answer !== undefined, 'the answer');
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(received, 0, 'nothing delivered: the stream is paused');
  t.notOk(drained, 'the writer still waits');
  answered!.resume();
  await until(() => drained, 'the writer drained once the answerer read', 5000);
  t.equal(received, 100_000, 'every byte, once read');
  t.same(errors, [], 'no FLOW_CONTROL_ERROR either way');
});

/** A session on the accepting end and a raw socket on the other, which speaks first (or not) as told. */
async function rawPeer(t: Test) {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => {});
  const [socket] = await accepted;
  const session = new FramedSession(socket, { side: 'dialer', onOpen: (stream) => echoFramed(stream), maxConcurrentStreams: 9 });
  const closed = new Promise<GateError | undefined>((resolve) =>
    session.once('close', (error: GateError | undefined) => {
      socket.destroy();
      resolve(error);
    }),
  );
  const hellos: HelloPayload[] = [];
  const goAways: GoAwayPayload[] = [];
  const firstTypes: number[] = [];
  const reader = new FrameReader((type, _flags, _id, payload) => {
    firstTypes.push(type);
    if (type === FrameType.HELLO) hellos.push(decodeHello(payload));
    if (type === FrameType.GOAWAY) goAways.push(decodeGoAway(payload));
  });
  raw.on('data', (chunk: Buffer) => reader.push(chunk));
  t.teardown(() => {
    raw.destroy();
    server.close();
  });
  return { raw, session, closed, hellos, goAways, firstTypes };
}

t.test('a session’s first frame is its HELLO, with the windows and the limit it was given', async (t) => {
  const h = await rawPeer(t);
  await until(() => h.hellos.length > 0, 'the HELLO');
  t.equal(h.firstTypes[0], FrameType.HELLO, 'the first frame');
  t.same(h.hellos[0], { streamWindow: 1 << 20, connectionWindow: 16 << 20, maxStreams: 9 });
});

for (const [name, first] of [
  ['a PING before the HELLO', controlFrame(FrameType.PING, 0, 0, Buffer.alloc(8))],
  ['a HELLO on stream 1', controlFrame(FrameType.HELLO, 0, 1, Buffer.alloc(12, 1))],
] as const) {
  t.test(`${name} breaks the framing: GOAWAY PROTOCOL_ERROR`, async (t) => {
    const h = await rawPeer(t);
    h.raw.write(first);
    const error = await h.closed;
    t.equal(error?.code, ErrorCodes.TUNNEL_PROTOCOL);
    await until(() => h.goAways.length > 0 || h.raw.destroyed, 'the GOAWAY');
    t.equal(h.goAways[0]?.code, WireError.PROTOCOL_ERROR);
  });
}

t.test('a second HELLO breaks the framing; a HELLO with a window of 0 too', async (t) => {
  const h = await rawPeer(t);
  const hello = helloFrame({ streamWindow: 4096, connectionWindow: 4096, maxStreams: 1 });
  h.raw.write(Buffer.concat([hello, hello]));
  t.equal((await h.closed)?.code, ErrorCodes.TUNNEL_PROTOCOL, 'a second HELLO');
  const zero = await rawPeer(t);
  const bytes = Buffer.from(hello);
  bytes.writeUInt32BE(0, 9); // the stream window
  zero.raw.write(bytes);
  t.equal((await zero.closed)?.code, ErrorCodes.TUNNEL_PROTOCOL, 'a window of 0');
  await until(() => zero.goAways.length > 0 || zero.raw.destroyed, 'the GOAWAY');
  t.equal(zero.goAways[0]?.code, WireError.PROTOCOL_ERROR);
});
