// The framing's limits on work (docs/tunnel-framing.md, "Limits"), on real loopback sockets, the
// hostile side a raw socket speaking the project's own codec (frames.ts): what it makes the
// session hold is bounded in objects, not only bytes, and past a bound the session ends with
// ENHANCE_YOUR_CALM and GATE_ERR_TUNNEL_FLOOD (issue 37).
import t, { type Test } from 'tap';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import { FramedDuplex } from '../../lib/tunnel-framing/framed-duplex.js';
import {
  FRAMES_PER_SLICE,
  FramedSession,
  type FramedSessionOptions,
  IDLE_FRAME_BURST,
  MAX_OWED_ANSWERS,
} from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import {
  controlFrame,
  decodeGoAway,
  encodeOpen,
  encodeWindow,
  frameHeader,
  FrameType,
  type GoAwayPayload,
  WireError,
  helloFrame,
} from '../../lib/tunnel-framing/frames.js';
import { splice } from '../../lib/transport/splice.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { listening } from '../helpers/net.js';
import { retainedHeap } from '../helpers/retained-heap.js';

const RAW_HELLO = { streamWindow: 1 << 20, connectionWindow: 16 << 20, maxStreams: 1000 };
const pick = ({ streamWindow, connectionWindow }: Partial<FramedSessionOptions>) => ({
  ...(streamWindow === undefined ? {} : { streamWindow }),
  ...(connectionWindow === undefined ? {} : { connectionWindow }),
});

/**
 * A session under test on the accepting end (the dialer's role: it answers opens) and a raw socket
 * on the other, which opens even-numbered streams. `onOpen` decides what the session does with them.
 */
async function underAttack(t: Test, options: Partial<FramedSessionOptions> = {}, onOpen = echoFramed) {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => {});
  // The raw side's first frame, as the framing asks of every side: it gives the windows it is given.
  raw.write(helloFrame({ ...RAW_HELLO, ...pick(options) }));
  const [socket] = await accepted;
  // As the registry and the peering ends do: the socket is destroyed when the session closes.
  const session = new FramedSession(socket, { side: 'dialer', onOpen: (stream) => onOpen(stream), ...options });
  const closed = new Promise<GateError | undefined>((resolve) =>
    session.once('close', (error: GateError | undefined) => {
      socket.destroy();
      resolve(error);
    }),
  );
  const goAways: GoAwayPayload[] = [];
  const reader = new FrameReader((type, _flags, _id, payload) => {
    if (type === FrameType.GOAWAY) goAways.push(decodeGoAway(payload));
  });
  raw.on('data', (chunk: Buffer) => reader.push(chunk));
  t.teardown(() => {
    raw.destroy();
    socket.destroy();
    server.close();
  });
  return { raw, socket, session, closed, goAways };
}

const MiB = 1024 * 1024;

const open = (id: number): Buffer => controlFrame(FrameType.OPEN, 0, id, encodeOpen({ kind: 0, target: 'x:1', client: '' }));
const ping = (n: number): Buffer => {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(n, 4);
  return controlFrame(FrameType.PING, 0, 0, payload);
};

/** Resolves at 'drain', 'close' or after `ms`, never rejecting (a cut socket errors with EPIPE). */
function drainedOrClosed(raw: Socket, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      raw.off('drain', done);
      raw.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    raw.once('drain', done);
    raw.once('close', done);
  });
}

/** Writes `frames` made by `make` in batches of `batch`, respecting backpressure, until `stop`. */
async function flood(raw: Socket, make: (i: number) => Buffer, count: number, batch: number, stop: () => boolean): Promise<number> {
  let sent = 0;
  const deadline = Date.now() + 15_000;
  while (sent < count && !stop() && !raw.destroyed && Date.now() < deadline) {
    const frames: Buffer[] = [];
    for (let i = 0; i < batch; i++) frames.push(make(sent + i));
    sent += batch;
    if (!raw.write(Buffer.concat(frames))) await drainedOrClosed(raw, 200);
  }
  return sent;
}

t.test('a PING flood that never reads its ACKs: the session cuts it with the code, its answers bounded in count', async (t) => {
  const h = await underAttack(t);
  h.raw.pause(); // never reads
  let done = false;
  let maxOwed = 0;
  let maxQueued = 0;
  const sampler = setInterval(() => {
    maxOwed = Math.max(maxOwed, h.session.owedAnswers);
    maxQueued = Math.max(maxQueued, h.socket.writableLength);
  }, 5);
  const heapBefore = retainedHeap();
  const closed = h.closed.then((error) => {
    done = true;
    return error;
  });
  // Small batches (well under a thousand PINGs per read): the bound that holds is the pause, then
  // the stall deadline; a million PINGs would take the old byte guard to cut.
  const sent = await flood(h.raw, ping, 2_000_000, 200, () => done);
  const error = await closed;
  clearInterval(sampler);
  const heapGrowth = retainedHeap() - heapBefore;
  t.equal(error?.code, ErrorCodes.TUNNEL_FLOOD, `cut with GATE_ERR_TUNNEL_FLOOD (${error?.message}) after ${sent} PINGs sent`);
  t.ok(maxOwed <= MAX_OWED_ANSWERS, `answers owed never past the bound (${maxOwed})`);
  t.ok(maxQueued < 8 << 20, `the socket's queue stayed small (${maxQueued} bytes at most)`);
  t.ok(heapGrowth < 64 << 20, `heap grew ${Math.round(heapGrowth / 1024)} KiB`);
});

t.test('PINGs in one read past the count: cut at once, ENHANCE_YOUR_CALM, and the GOAWAY is read', async (t) => {
  const h = await underAttack(t);
  const pings: Buffer[] = [];
  for (let i = 0; i < MAX_OWED_ANSWERS + 500; i++) pings.push(ping(i));
  // One write, so one read holds more PINGs than the session may owe answers to.
  h.raw.write(Buffer.concat(pings));
  const error = await h.closed;
  t.equal(error?.code, ErrorCodes.TUNNEL_FLOOD);
  while (h.goAways.length === 0 && !h.raw.destroyed) await new Promise((resolve) => setTimeout(resolve, 5));
  t.equal(h.goAways[0]?.code, WireError.ENHANCE_YOUR_CALM, `the GOAWAY reached the peer: ${h.goAways[0]?.reason}`);
});

t.test('an empty-DATA flood and a tiny-WINDOW flood each spend the idle-frame budget and are cut', async (t) => {
  const cases: Array<[string, (i: number) => Buffer]> = [
    ['empty DATA without END', () => frameHeader(FrameType.DATA, 0, 2, 0)],
    ['WINDOW of one byte on the connection', () => controlFrame(FrameType.WINDOW, 0, 0, encodeWindow(1))],
    ['PING ACKs for no PING', (i) => controlFrame(FrameType.PING, 1, 0, Buffer.alloc(8, i & 0xff))],
    ['frames of an unknown type', () => controlFrame(0x42, 0, 0, Buffer.alloc(4))],
  ];
  for (const [what, make] of cases) {
    const h = await underAttack(t);
    h.raw.write(open(2));
    const sent = await flood(h.raw, make, IDLE_FRAME_BURST * 4, 100, () => h.session.closed);
    const error = await h.closed;
    t.equal(error?.code, ErrorCodes.TUNNEL_FLOOD, `${what}: cut (${error?.message}), ${sent} sent`);
    while (h.goAways.length === 0 && !h.raw.destroyed) await new Promise((resolve) => setTimeout(resolve, 5));
    t.equal(h.goAways[0]?.code, WireError.ENHANCE_YOUR_CALM, `${what}: GOAWAY ENHANCE_YOUR_CALM read by the peer`);
  }
});

t.test('a FIN with no payload and a few idle frames are not a flood', async (t) => {
  const h = await underAttack(t);
  h.raw.write(open(2));
  for (let i = 0; i < 20; i++) h.raw.write(frameHeader(FrameType.DATA, 0, 2, 0));
  h.raw.write(frameHeader(FrameType.DATA, 1, 2, 0));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.notOk(h.session.closed, 'the session carries on');
});

/** One-byte DATA frames to stream 2, `count` of them, with no END. */
function dribble(count: number): Buffer {
  const frame = Buffer.concat([frameHeader(FrameType.DATA, 0, 2, 1), Buffer.from('x')]);
  const all = Buffer.allocUnsafe(frame.length * count);
  for (let i = 0; i < count; i++) frame.copy(all, i * frame.length);
  return all;
}

/** The bytes one-byte frames may hold in a stream: its window, sent in writes of 10,000 frames. */
async function sendDribble(raw: Socket, bytes: number): Promise<void> {
  for (let sent = 0; sent < bytes; sent += 10_000) {
    if (!raw.write(dribble(Math.min(10_000, bytes - sent)))) await drainedOrClosed(raw, 1000);
  }
}

t.test('one-byte DATA frames to a paused stream: the objects it holds are bounded, not one per frame', async (t) => {
  const window = 256 * 1024;
  let taken: FramedStream | undefined;
  const h = await underAttack(t, { streamWindow: window, connectionWindow: 4 * window }, (stream) => {
    taken = stream;
    stream.respond({ status: 200, code: '', reason: '' }); // answered, never read: it stays paused
  });
  h.raw.write(open(2));
  const heapBefore = retainedHeap();
  await sendDribble(h.raw, window);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && (taken === undefined || taken.heldPieces === 0 || h.socket.bytesRead < window * 10))
    await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const stream = taken!;
  const heapGrowth = retainedHeap() - heapBefore;
  t.notOk(h.session.closed, 'within its credit: the session carries on');
  t.ok(stream.heldPieces <= 64, `${window} one-byte frames held in ${stream.heldPieces} objects`);
  t.ok(heapGrowth < 8 << 20, `heap grew ${Math.round(heapGrowth / 1024)} KiB (one Buffer a frame: about 35 MiB)`);
  // Read now: every byte arrives, in order.
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  stream.resume();
  await new Promise((resolve) => setTimeout(resolve, 20));
  const got = Buffer.concat(chunks);
  t.equal(got.length, window, 'every byte delivered');
  t.ok(
    got.every((b) => b === 0x78),
    'as sent',
  );
});

t.test('a burst of one-byte DATA frames is read in slices: the event loop turns between them, every byte in order', async (t) => {
  // 64 Ki frames in one write: a socket read of 64 KiB holds some 6,500 of them. Read whole, each
  // read is one macrotask of 6,500 frames; in slices, at most FRAMES_PER_SLICE between two turns.
  const FRAMES = 64 * 1024;
  const got: Buffer[] = [];
  let taken: FramedStream | undefined;
  const h = await underAttack(t, {}, (stream) => {
    taken = stream;
    stream.respond({ status: 200, code: '', reason: '' });
    stream.on('data', (chunk: Buffer) => {
      got.push(Buffer.from(chunk));
      sinceTurn++;
    });
    stream.resume();
  });
  // A ticker on the event loop: the most frames delivered between two of its turns.
  let sinceTurn = 0;
  let mostInOneTurn = 0;
  let turns = 0;
  let ticking = true;
  const tick = (): void => {
    mostInOneTurn = Math.max(mostInOneTurn, sinceTurn);
    sinceTurn = 0;
    turns++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  t.teardown(() => {
    ticking = false;
  });
  h.raw.write(open(2));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const burst = Buffer.allocUnsafe(FRAMES * 10);
  for (let i = 0; i < FRAMES; i++) {
    frameHeader(FrameType.DATA, 0, 2, 1).copy(burst, i * 10);
    burst[i * 10 + 9] = i & 0xff;
  }
  // Then the raw side's FIN: the session must read what it held back before it takes the end.
  h.raw.end(burst);
  const closedWith = await Promise.race([h.closed, new Promise((resolve) => setTimeout(resolve, 10_000, 'timeout'))]);
  ticking = false;
  t.not(closedWith, 'timeout', "the session ends at the raw side's FIN");
  const all = Buffer.concat(got);
  t.ok(taken, 'the stream was opened');
  t.equal(all.length, FRAMES, 'every byte delivered before the FIN ended the session');
  t.ok(
    all.every((b, i) => b === (i & 0xff)),
    'in order',
  );
  t.ok(
    mostInOneTurn <= 2 * FRAMES_PER_SLICE,
    `at most ${mostInOneTurn} frames between two turns of the event loop (${turns} turns; bound ${2 * FRAMES_PER_SLICE})`,
  );
});

t.test('one-byte DATA frames through a Duplex nobody reads: its read-ahead holds few objects', async (t) => {
  const window = 256 * 1024;
  let duplex: FramedDuplex | undefined;
  const h = await underAttack(t, { streamWindow: window, connectionWindow: 4 * window }, (stream) => {
    stream.respond({ status: 200, code: '', reason: '' });
    duplex = new FramedDuplex(stream);
    duplex.on('error', () => {}); // destroyed with the session at teardown
    duplex.pause();
    duplex.read(0); // starts the stream; nothing is taken from the Duplex after that
  });
  h.raw.write(open(2));
  await sendDribble(h.raw, window);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && h.socket.bytesRead < window * 10) await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const d = duplex!;
  const buffered = (d as unknown as { _readableState: { buffer: { length: number } } })._readableState.buffer.length;
  t.ok(d.readableLength + d.stream.heldPieces > 0, 'bytes are held');
  t.ok(buffered <= 64, `${d.readableLength} bytes in the read-ahead as ${buffered} chunks`);
  t.ok(d.stream.heldPieces <= 64, `${d.stream.heldPieces} objects held behind it in the stream`);
  const chunks: Buffer[] = [];
  d.on('data', (chunk: Buffer) => chunks.push(chunk));
  d.resume();
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(Buffer.concat(chunks).length, window, 'every byte delivered once read');
});

t.test('one-byte DATA frames relayed to a client whose buffers are full: few objects at every step', async (t) => {
  // The proxy's path for a client whose TLS ended there: the stream as a Duplex, spliced to the
  // client's socket (lib/tunnel/via-tunnel.ts). The client reads nothing, and its connection's
  // buffers are filled first, so what comes next is held by this side.
  const sinkServer = createServer((socket) => socket.pause());
  const sinkPort = await listening(sinkServer);
  const accepted = once(sinkServer, 'connection') as Promise<[Socket]>;
  const far = connect(sinkPort, '127.0.0.1');
  const [client] = await accepted;
  t.teardown(() => {
    far.destroy();
    client.destroy();
    sinkServer.close();
  });
  far.pause();
  const bulk = Buffer.alloc(64 * 1024);
  for (let i = 0; i < 1000; i++) {
    const taken = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 200);
      client.write(bulk, () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!taken) break;
  }
  const window = 256 * 1024;
  let duplex: FramedDuplex | undefined;
  const h = await underAttack(t, { streamWindow: window, connectionWindow: 4 * window }, (stream) => {
    stream.respond({ status: 200, code: '', reason: '' });
    duplex = new FramedDuplex(stream);
    duplex.on('error', () => {});
    splice(client, duplex, () => {}, undefined, { coalesceA: true, coalesceB: true });
  });
  h.raw.write(open(2));
  await sendDribble(h.raw, window);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && h.socket.bytesRead < window * 10) await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 100));
  const d = duplex!;
  const queued = (client as unknown as { writableBuffer: unknown[] }).writableBuffer.length;
  const readAhead = (d as unknown as { _readableState: { buffer: { length: number } } })._readableState.buffer.length;
  t.ok(client.writableLength > 0, `the client's socket holds ${client.writableLength} bytes it cannot send`);
  t.ok(queued <= 300, `in ${queued} writes (one a frame: about ${window})`);
  t.ok(readAhead <= 64, `the Duplex's read-ahead: ${d.readableLength} bytes in ${readAhead} chunks`);
  t.ok(d.stream.heldPieces <= 64, `the stream: ${d.stream.heldPieces} objects held`);
});

t.test('a peer that grants credit and never reads: this side stops sending at 4 MiB of its own output queued', async (t) => {
  let written = 0;
  let blocked = false;
  const h = await underAttack(t, {}, (stream) => {
    stream.respond({ status: 200, code: '', reason: '' });
    // A client with 64 MiB to send, as fast as the stream takes it.
    const chunk = Buffer.alloc(64 * 1024);
    const pump = (): void => {
      while (written < 64 * MiB) {
        written += chunk.length;
        if (!stream.write(chunk)) {
          blocked = true;
          stream.once('drain', () => {
            blocked = false;
            pump();
          });
          return;
        }
      }
    };
    pump();
  });
  h.raw.pause(); // never reads
  // Credit for far more than that: 1 GiB on the stream and on the connection.
  h.raw.write(
    Buffer.concat([
      open(2),
      controlFrame(FrameType.WINDOW, 0, 2, encodeWindow(1 << 30)),
      controlFrame(FrameType.WINDOW, 0, 0, encodeWindow(1 << 30)),
    ]),
  );
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && !blocked) await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.ok(blocked, `the writer waits for drain (${Math.round(written / MiB)} MiB taken)`);
  t.ok(h.socket.writableLength < 8 * MiB, `the socket holds ${Math.round(h.socket.writableLength / 1024)} KiB, not the 64 MiB granted`);
  t.ok(written < 24 * MiB, 'and the stream took no more than that and what the kernel holds');
});

t.test('a GOAWAY for a broken framing reaches a peer whose reading lagged, though the socket is destroyed at close', async (t) => {
  const h = await underAttack(t, { streamWindow: 16 << 20, connectionWindow: 16 << 20 });
  h.raw.pause(); // behind: the echo's bytes wait in the session's socket
  h.raw.write(open(2));
  h.raw.write(Buffer.concat([frameHeader(FrameType.DATA, 0, 2, 60_000), Buffer.alloc(60_000)]));
  const big = Buffer.concat(
    Array.from({ length: 120 }, () => Buffer.concat([frameHeader(FrameType.DATA, 0, 2, 60_000), Buffer.alloc(60_000)])),
  );
  h.raw.write(big);
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && h.socket.writableLength === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  const queued = h.socket.writableLength;
  // A frame the framing refuses: the session ends with a GOAWAY behind what it queued.
  h.raw.write(frameHeader(FrameType.DATA, 0, 2, 1 << 20));
  h.raw.resume();
  const error = await h.closed;
  t.equal(error?.code, ErrorCodes.TUNNEL_PROTOCOL);
  while (h.goAways.length === 0 && !h.raw.destroyed) await new Promise((resolve) => setTimeout(resolve, 5));
  t.ok(queued > 0, `${queued} bytes were queued ahead of it`);
  t.equal(h.goAways[0]?.code, WireError.FRAME_SIZE_ERROR, 'the peer read the GOAWAY');
});

t.test('before admission: a few PINGs are answered, the next ends the session; an OPEN ends it at once', async (t) => {
  const limits = { pings: 3, bytes: 64 * 1024, idleFrames: 4 };
  const h = await underAttack(t, { untilAdmitted: limits });
  const acks: number[] = [];
  const reader = new FrameReader((type, flags) => {
    if (type === FrameType.PING && flags === 1) acks.push(1);
  });
  h.raw.on('data', (chunk: Buffer) => reader.push(chunk));
  h.raw.write(Buffer.concat([ping(1), ping(2), ping(3)]));
  while (acks.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
  t.notOk(h.session.closed, 'three answered');
  h.raw.write(ping(4));
  const error = await h.closed;
  t.equal(error?.code, ErrorCodes.TUNNEL_FLOOD, error?.message ?? '');
  t.equal(acks.length, 3, 'the fourth was not answered');

  const o = await underAttack(t, { untilAdmitted: limits });
  o.raw.write(open(2));
  t.equal((await o.closed)?.code, ErrorCodes.TUNNEL_FLOOD, 'an OPEN before admission');

  const b = await underAttack(t, { untilAdmitted: limits });
  // Useful frames (WINDOWs of 1 KiB, 13 bytes each), but more bytes than allowed before admission.
  const window = controlFrame(FrameType.WINDOW, 0, 0, encodeWindow(1024));
  b.raw.write(Buffer.concat(Array.from({ length: 6000 }, () => window)));
  const tooMuch = await b.closed;
  t.equal(tooMuch?.code, ErrorCodes.TUNNEL_FLOOD, 'bytes past the admission budget');
  t.match(tooMuch?.message ?? '', /more bytes than/);

  const a = await underAttack(t, { untilAdmitted: limits });
  a.session.admit();
  a.raw.write(Buffer.concat([ping(1), ping(2), ping(3), ping(4), ping(5), open(2)]));
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.notOk(a.session.closed, 'once admitted, the limits are gone');
});
