// The framed tunnel session (lib/tunnel-framing/framed-session.ts) over real loopback connections
// (TCP, and TLS for one): what a tunnel must carry, and what a hostile other side cannot do to it.
// The hostile side is a raw socket writing frames by hand.
import t, { type Test } from 'tap';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { connect as tlsConnect, createServer as tlsCreateServer, type TLSSocket } from 'node:tls';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import { FramedSession, type FramedSessionOptions } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import {
  decodeAnswer,
  controlFrame,
  decodeGoAway,
  encodeOpen,
  encodeReset,
  frameHeader,
  FrameType,
  helloFrame,
  type GoAwayPayload,
  type OpenPayload,
  WireError,
} from '../../lib/tunnel-framing/frames.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { listening, until } from '../helpers/net.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';

type OnOpen = (stream: FramedStream, open: OpenPayload) => void;

/** A connected pair over loopback TCP: the listener side opens streams, the dialer answers them. */
async function pair(
  t: Test,
  onOpen: OnOpen,
  options: Partial<FramedSessionOptions> = {},
): Promise<{ opener: FramedSession; answerer: FramedSession; sockets: Socket[] }> {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  const answerer = new FramedSession(client, { side: 'dialer', onOpen, ...options });
  const opener = new FramedSession(socket, { side: 'listener', ...options });
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  return { opener, answerer, sockets: [client, socket] };
}

function collect(stream: FramedStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(Buffer.from(chunk)));
  stream.resume();
  return once(stream, 'end').then(() => Buffer.concat(chunks));
}

/** An echo: answers 200, sends back what comes in, then its own FIN after the other's. */
const echo: OnOpen = (stream) => echoFramed(stream);

function patterned(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7) % 251;
  return bytes;
}

t.test('2 MiB past every credit arrive whole and in order, both ways, and the stream closes clean', async (t) => {
  const opens: OpenPayload[] = [];
  const { opener } = await pair(
    t,
    (stream, open) => {
      opens.push(open);
      echo(stream, open);
    },
    { streamWindow: 64 * 1024, connectionWindow: 256 * 1024 },
  );
  const stream = opener.open({ kind: 0, target: 'db.internal:5432', client: '127.0.0.1:40000' });
  const big = patterned(2 * 1024 * 1024);
  t.equal(stream.write(big), false, 'a write past the credit is queued');
  stream.end();
  const [answer] = (await once(stream, 'response')) as [{ status: number }];
  const echoed = collect(stream);
  const closed = once(stream, 'close');
  t.same(await echoed, big, 'echoed whole and in order');
  await closed;
  t.equal(answer.status, 200);
  t.equal(stream.closeCode, undefined, 'closed clean: both FINs');
  t.same(
    opens,
    [{ kind: 0, target: 'db.internal:5432', client: '127.0.0.1:40000' }],
    'the target and the client address came with the open',
  );
  t.equal(opener.openStreams, 0, 'the session forgot it');
});

t.test('bytes and a FIN sent before the answer are held until the stream is read', async (t) => {
  let taken: FramedStream | undefined;
  const { opener } = await pair(t, (stream) => {
    taken = stream;
  });
  const stream = opener.open({ kind: 0, target: 'x:1', client: '' });
  stream.write(Buffer.from('first flight'));
  stream.end();
  // The answerer "dials" for a while: the early bytes and the FIN wait for it.
  while (!taken) await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise((resolve) => setTimeout(resolve, 30));
  const answerer = taken;
  answerer.respond({ status: 200, code: '', reason: '' });
  const got = collect(answerer);
  t.equal((await got).toString(), 'first flight', 'held, then delivered whole');
  answerer.write(Buffer.from('reply'));
  answerer.end();
  t.equal((await collect(stream)).toString(), 'reply', 'half-closed one way, the other still carried bytes');
});

t.test('bytes and a FIN the answerer writes before it answers wait for the answer, in order', async (t) => {
  const { opener } = await pair(t, (stream) => {
    t.equal(stream.write(Buffer.from('greeting ')), false, 'held until the answer');
    stream.end();
    setTimeout(() => stream.respond({ status: 200, code: '', reason: '' }), 20);
  });
  const stream = opener.open({ kind: 0, target: 'x:1', client: '' });
  const got = collect(stream);
  const closed = once(stream, 'close');
  stream.end();
  t.equal((await got).toString(), 'greeting ', 'after the ANSWER, with its FIN: the framing was kept');
  await closed;
  t.equal(stream.closeCode, undefined);
});

t.test('streams stay apart: a refusal and a reset end one stream, with the reason, and not the others', async (t) => {
  const { opener } = await pair(t, (stream, open) => {
    if (open.target === 'denied:22') return stream.respond({ status: 403, code: 'GATE_ERR_AGENT_TARGET_DENIED', reason: 'not allowed' });
    if (open.target === 'reset:1') {
      stream.respond({ status: 200, code: '', reason: '' });
      return stream.reset(WireError.INTERNAL_ERROR, 'upstream vanished');
    }
    echo(stream, open);
  });
  const good = opener.open({ kind: 0, target: 'ok:1', client: '' });
  const denied = opener.open({ kind: 0, target: 'denied:22', client: '' });
  const reset = opener.open({ kind: 0, target: 'reset:1', client: '' });
  const resetClosed = once(reset, 'close');
  await once(denied, 'close');
  t.same(denied.answer, { status: 403, code: 'GATE_ERR_AGENT_TARGET_DENIED', reason: 'not allowed' });
  t.equal(denied.closeCode, WireError.REFUSED_STREAM);
  await resetClosed;
  t.equal(reset.closeCode, WireError.INTERNAL_ERROR);
  t.equal(reset.closeReason, 'upstream vanished');
  t.ok(reset.closedByPeer, 'reset by the other side');
  const echoed = collect(good);
  good.write(Buffer.from('still here'));
  good.end();
  t.equal((await echoed).toString(), 'still here', 'the third stream carried on');
});

t.test('a paused reader holds no more than its window, and the writer waits for drain', async (t) => {
  let taken: FramedStream | undefined;
  const { opener } = await pair(
    t,
    (stream) => {
      taken = stream;
      stream.respond({ status: 200, code: '', reason: '' });
    },
    { streamWindow: 4096, connectionWindow: 8192 },
  );
  const stream = opener.open({ kind: 0, target: 'x:1', client: '' });
  await once(stream, 'response');
  t.equal(stream.write(Buffer.alloc(20_000, 1)), false, 'past the window: queued');
  let drained = false;
  stream.once('drain', () => (drained = true));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.notOk(drained, 'no drain while the reader is paused');
  const reader = taken!;
  let got = 0;
  let most = 0;
  reader.on('data', (chunk: Buffer) => {
    got += chunk.length;
    most = Math.max(most, chunk.length);
  });
  reader.resume();
  await once(stream, 'drain');
  stream.end();
  await once(reader, 'end');
  t.equal(got, 20_000, 'every byte once read');
  t.ok(most <= 4096, `no frame past the window (${most})`);
});

t.test('a reset stream gives its held bytes back to the connection, so its neighbours go on', async (t) => {
  const taken: FramedStream[] = [];
  const { opener } = await pair(
    t,
    (stream) => {
      taken.push(stream);
      stream.respond({ status: 200, code: '', reason: '' });
    },
    { streamWindow: 8192, connectionWindow: 8192 },
  );
  const hog = opener.open({ kind: 0, target: 'hog:1', client: '' });
  const other = opener.open({ kind: 0, target: 'other:1', client: '' });
  await Promise.all([once(hog, 'response'), once(other, 'response')]);
  hog.write(Buffer.alloc(8192, 1)); // the whole connection window, held by a paused reader
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.equal(other.write(Buffer.alloc(100, 2)), false, 'the connection has no credit left');
  taken[0]!.reset(WireError.CANCEL, 'not reading'); // the hog goes: its 8 KiB of credit come back
  const [, reader] = taken;
  const got = collect(reader!);
  await once(other, 'drain');
  other.end();
  t.equal((await got).length, 100, 'the neighbour was carried');
});

t.test('an open whose target cannot be carried is refused here, and leaves no stream behind', async (t) => {
  const { opener } = await pair(t, echo);
  t.throws(() => opener.open({ kind: 0, target: 'a target with spaces:1', client: '' }), { code: ErrorCodes.INVALID_ARGUMENT });
  t.equal(opener.openStreams, 0, 'nothing left open');
  const stream = opener.open({ kind: 0, target: 'ok:1', client: '' });
  t.equal(stream.id, 2, 'the refused open took no id');
});

t.test('opens past the concurrency limit are refused, the streams within it carry on', async (t) => {
  const { opener } = await pair(t, () => {}, { maxConcurrentStreams: 2 });
  const [a, b, c] = ['a:1', 'b:1', 'c:1'].map((target) => opener.open({ kind: 0, target, client: '' }));
  await once(c!, 'close');
  t.equal(c!.closeCode, WireError.REFUSED_STREAM);
  t.match(c!.closeReason, /more than 2 concurrent streams/);
  t.notOk(a!.closed || b!.closed, 'the first two are still open');
});

t.test('a PING comes back; a closed session fails the ones in flight', async (t) => {
  const { opener, answerer } = await pair(t, echo);
  const sent = performance.now();
  const ms = await new Promise<number>((resolve, reject) => opener.ping((err, rtt) => (err ? reject(err) : resolve(rtt))));
  const waited = performance.now() - sent;
  // The round trip is measured in milliseconds between the PING and its echo: more than nothing,
  // and within the time this test waited for it (a unit or a clock wrong would be far outside).
  t.ok(ms > 0 && ms <= waited, `answered in ${ms.toFixed(3)} ms, of the ${waited.toFixed(3)} ms waited`);
  const failed = new Promise<GateError | undefined>((resolve) => answerer.ping((err) => resolve(err)));
  answerer.destroy();
  t.ok(await failed, 'the PING in flight failed with the session');
});

t.test('GOAWAY drains: no new streams, the open ones finish, then the connection ends on both sides', async (t) => {
  const { opener, answerer } = await pair(t, echo);
  const stream = opener.open({ kind: 0, target: 'x:1', client: '' });
  await once(stream, 'response');
  const goAway = once(opener, 'goaway') as Promise<[GoAwayPayload]>;
  answerer.goAway(WireError.NO_ERROR, 'proxy draining');
  const [told] = await goAway;
  t.equal(told.reason, 'proxy draining');
  t.throws(() => opener.open({ kind: 0, target: 'y:1', client: '' }), { code: ErrorCodes.AGENT_STREAM_FAILED }, 'no new stream');
  const closed = Promise.all([once(opener, 'close'), once(answerer, 'close')]);
  const echoed = collect(stream);
  stream.write(Buffer.from('last words'));
  stream.end();
  t.equal((await echoed).toString(), 'last words', 'the open stream finished');
  const [[openerError], [answererError]] = (await closed) as [[unknown], [unknown]];
  t.equal(openerError, undefined, 'the opener closed clean');
  t.equal(answererError, undefined, 'the answerer closed clean');
});

t.test('a session that dies resets every stream with why, and the other side sees each closed', async (t) => {
  const { opener, answerer } = await pair(t, echo);
  const streams = [1, 2, 3].map((n) => opener.open({ kind: 0, target: `t:${n}`, client: '' }));
  await Promise.all(streams.map((s) => once(s, 'response')));
  const closed = once(opener, 'close') as Promise<[GateError | undefined]>;
  answerer.destroy();
  const [error] = await closed;
  t.equal(error?.code, ErrorCodes.AGENT_STREAM_FAILED);
  for (const stream of streams) {
    t.ok(stream.closed, `stream ${stream.id} closed`);
    t.equal(stream.closeCode, WireError.CANCEL);
  }
  t.equal(opener.openStreams, 0);
});

t.test('over TLS, as a tunnel runs it', async (t) => {
  const { ca, server: pairOf } = devCertificates();
  const server = tlsCreateServer({ cert: pairOf.cert, key: pairOf.key });
  const port = await listening(server);
  const accepted = once(server, 'secureConnection') as Promise<[TLSSocket]>;
  const client = tlsConnect({ port, host: '127.0.0.1', servername: 'localhost', ca: ca.cert });
  const [socket] = await accepted;
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  new FramedSession(client, { side: 'dialer', onOpen: echo });
  const opener = new FramedSession(socket, { side: 'listener' });
  const payloads = await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      const stream = opener.open({ kind: 0, target: `s:${i + 1}`, client: '' });
      const bytes = patterned(10_000 + i * 3001);
      const echoed = collect(stream);
      stream.write(bytes);
      stream.end();
      return (await echoed).equals(bytes);
    }),
  );
  t.same(payloads, Array(20).fill(true), '20 concurrent streams, each echoed whole');
});

/** A hostile other side: a raw socket that writes frames by hand and reads the session's GOAWAY. */
async function hostile(t: Test, options: Partial<FramedSessionOptions> = {}) {
  const server = createServer();
  const port = await listening(server);
  const sessions: FramedSession[] = [];
  const errors: (GateError | undefined)[] = [];
  let closed = (): void => {};
  const sessionClosed = new Promise<void>((resolve) => (closed = resolve));
  server.on('connection', (socket) => {
    const session = new FramedSession(socket, { side: 'dialer', onOpen: echo, ...options });
    session.on('close', (err: GateError | undefined) => {
      errors.push(err);
      closed();
    });
    sessions.push(session);
  });
  const raw = connect(port, '127.0.0.1');
  await once(raw, 'connect');
  raw.write(helloFrame({ streamWindow: 1 << 20, connectionWindow: 16 << 20, maxStreams: 1000 }));
  const goAways: GoAwayPayload[] = [];
  const reader = new FrameReader((type, _flags, _id, payload) => {
    if (type === FrameType.GOAWAY) goAways.push(decodeGoAway(payload));
  });
  raw.on('data', (chunk: Buffer) => reader.push(chunk));
  raw.on('error', () => {});
  // The raw side closed, and the session told its 'close' (after its socket closed: goAwayNow).
  const ended = Promise.all([once(raw, 'close'), sessionClosed]);
  t.teardown(() => {
    raw.destroy();
    server.close();
  });
  return { raw, goAways, errors, sessions, ended, port };
}

const open = (id: number, target = 'x:1'): Buffer => controlFrame(FrameType.OPEN, 0, id, encodeOpen({ kind: 0, target, client: '' }));

t.test('hostile: a frame longer than the bound ends that session with FRAME_SIZE_ERROR, and only it', async (t) => {
  const h = await hostile(t);
  // A well-behaved neighbour on the same listener, mid-stream.
  const neighbour = new FramedSession(connect(h.port, '127.0.0.1'), { side: 'listener' });
  t.teardown(() => neighbour.destroy());
  const stream = neighbour.open({ kind: 0, target: 'n:1', client: '' });
  await once(stream, 'response');
  h.raw.write(frameHeader(FrameType.DATA, 0, 2, 1 << 20));
  await h.ended;
  t.equal(h.goAways[0]?.code, WireError.FRAME_SIZE_ERROR);
  t.match(h.goAways[0]?.reason, /a frame of 1048576 bytes/);
  t.equal(h.errors[0]?.code, ErrorCodes.TUNNEL_PROTOCOL, 'the session closed with GATE_ERR_TUNNEL_PROTOCOL');
  const echoed = collect(stream);
  stream.write(Buffer.from('unharmed'));
  stream.end();
  t.equal((await echoed).toString(), 'unharmed', 'the neighbour session carried on');
});

t.test('hostile: DATA past the credit ends the session with FLOW_CONTROL_ERROR', async (t) => {
  const h = await hostile(t, { streamWindow: 1000 });
  h.raw.write(Buffer.concat([open(2), frameHeader(FrameType.DATA, 0, 2, 1001), Buffer.alloc(1001)]));
  await h.ended;
  t.equal(h.goAways[0]?.code, WireError.FLOW_CONTROL_ERROR);
  t.equal(h.sessions[0]?.openStreams, 0, 'no stream left behind');
});

t.test('hostile: frames for streams never opened, and opens that reuse an id, are PROTOCOL_ERROR', async (t) => {
  for (const [what, bytes] of [
    ['DATA for a stream never opened', Buffer.concat([frameHeader(FrameType.DATA, 0, 8, 1), Buffer.of(1)])],
    ['an OPEN with the wrong parity', open(3)],
    ['an OPEN reusing an id', Buffer.concat([open(4), open(4)])],
    ['a RESET for a stream never opened', controlFrame(FrameType.RESET, 0, 6, encodeReset({ code: 8, reason: '' }))],
    ['a GOAWAY on a stream', controlFrame(FrameType.GOAWAY, 0, 2, Buffer.alloc(8))],
    ['a PING of 7 bytes', controlFrame(FrameType.PING, 0, 0, Buffer.alloc(7))],
  ] as const) {
    const h = await hostile(t);
    h.raw.write(bytes);
    await h.ended;
    t.ok(h.goAways[0] !== undefined && h.goAways[0].code !== WireError.NO_ERROR, `${what}: ${h.goAways[0]?.reason}`);
    t.equal(h.errors[0]?.code, ErrorCodes.TUNNEL_PROTOCOL);
  }
});

t.test('hostile: a rapid-reset flood ends the session with ENHANCE_YOUR_CALM', async (t) => {
  // Each stream reset before it is answered (the answerer dials, as an agent does): what the
  // budget counts. A reset after the answer is not (test/tunnel-framing/reset-budget.test.ts).
  const h = await hostile(t, { onOpen: () => {}, resetBurst: 50, resetsPerSecond: 1 });
  const frames: Buffer[] = [];
  for (let id = 2; id <= 2 + 2 * 200; id += 2) {
    frames.push(open(id), controlFrame(FrameType.RESET, 0, id, encodeReset({ code: WireError.CANCEL, reason: '' })));
  }
  h.raw.write(Buffer.concat(frames));
  await h.ended;
  t.equal(h.goAways[0]?.code, WireError.ENHANCE_YOUR_CALM);
  t.match(h.goAways[0]?.reason, /rapid reset/);
  t.equal(h.sessions[0]?.openStreams, 0, 'no stream left behind');
});

t.test('hostile: opens to a side that takes none are each refused 501, and a flood of them ends the session', async (t) => {
  const h = await hostile(t, { onOpen: undefined, resetBurst: 50, resetsPerSecond: 1 });
  const answers: number[] = [];
  const reader = new FrameReader((type, _flags, _id, payload) => {
    if (type === FrameType.ANSWER) answers.push(decodeAnswer(payload).status);
  });
  h.raw.on('data', (chunk: Buffer) => reader.push(chunk));
  h.raw.write(open(2));
  await until(() => answers.length === 1, 'the first open answered');
  t.same(answers, [501], 'refused with 501, no stream kept');
  t.equal(h.sessions[0]?.openStreams, 0);
  const frames: Buffer[] = [];
  for (let id = 4; id <= 4 + 2 * 200; id += 2) frames.push(open(id));
  h.raw.write(Buffer.concat(frames));
  await h.ended;
  t.equal(h.goAways[0]?.code, WireError.ENHANCE_YOUR_CALM, 'the refusals spent the reset budget');
  t.match(h.goAways[0]?.reason, /rapid reset/);
});

t.test('hostile: the other side going away without a GOAWAY fails the streams rather than leaving them', async (t) => {
  const h = await hostile(t);
  h.raw.write(open(2));
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.equal(h.sessions[0]?.openStreams, 1);
  h.raw.end();
  await h.ended;
  t.equal(h.errors[0]?.code, ErrorCodes.AGENT_STREAM_FAILED);
  t.equal(h.sessions[0]?.openStreams, 0);
});

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

t.test("a write's callback runs once the socket has taken its bytes, not when it is queued", async (t) => {
  // Windows above the kernel's loopback buffers (a few MiB each way): with the other end not
  // reading, the socket's write of 24 MiB stays queued in libuv.
  const windows = { streamWindow: 32 << 20, connectionWindow: 32 << 20 };
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [peer] = await accepted;
  peer.pause();
  // The other end's HELLO: it gives this side the same windows (and then reads nothing for a while).
  peer.write(helloFrame({ ...windows, maxStreams: 1000 }));
  t.teardown(() => {
    client.destroy();
    peer.destroy();
    server.close();
  });
  const session = new FramedSession(client, { side: 'dialer', ...windows });
  const stream = session.open({ kind: 0, target: 'db.internal:5432', client: '' });
  let written = 0;
  // Within the credit, but past what a session queues in its socket (OUTPUT_HIGH_BYTES, 4 MiB):
  // the rest waits for the socket to drain, and the callback comes with the last byte.
  t.notOk(
    stream.write(Buffer.alloc(24 << 20, 7), () => written++),
    'within the credit, past the output bound: the rest waits',
  );
  // Turns flush and drain into the kernel until its buffers are full; then the socket holds some,
  // and holds it: a moment's backlog the kernel then takes (its buffers grow) is not yet that.
  await until(async () => {
    const held = client.writableLength;
    await new Promise((resolve) => setTimeout(resolve, 50));
    return held > 0 && client.writableLength === held;
  }, 'the kernel buffers full');
  await turn();
  t.ok(client.writableLength > 0, 'the turns were flushed, and the socket still holds part of them');
  t.equal(written, 0, 'so the writer is not told yet');
  let received = 0;
  peer.on('data', (chunk: Buffer) => {
    received += chunk.length;
  });
  peer.resume();
  await until(() => written === 1, 'the callback once the other end reads');
  t.ok(received > 0);
  t.equal(client.writableLength, 0, 'told only once the socket holds nothing');
  session.destroy();
});

t.test('a session destroyed before its turn was written calls its writes back all the same', async (t) => {
  const { opener } = await pair(t, echo);
  const stream = opener.open({ kind: 0, target: 'db.internal:5432', client: '' });
  let written = 0;
  stream.write(Buffer.alloc(1000), () => written++);
  opener.destroy();
  await turn();
  t.equal(written, 1, 'the frame was dropped, and its writer told');
  stream.write(Buffer.alloc(1000), () => written++);
  await turn();
  t.equal(written, 2, 'a write after the end is told at once too');
});
