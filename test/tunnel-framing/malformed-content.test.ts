// A frame whose framing is sound but whose content is bad for its stream ends that stream, not the
// session (docs/tunnel-framing.md, "Violations"): an ANSWER whose code is not [A-Z0-9_]* or whose
// reason is over 1 KiB is a stream error (RESET PROTOCOL_ERROR, the opener's stream closed with
// why), and a second stream on the same session carries on; so is an OPEN whose texts are not
// printable. An ANSWER the stream cannot take (a second one) still ends the session. The session
// under test opens; the other side is a raw socket writing frames by hand.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import type { GateError } from '../../lib/errors.js';
import { FrameReader } from '../../lib/tunnel-framing/frame-reader.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import {
  controlFrame,
  decodeGoAway,
  decodeReset,
  encodeAnswer,
  encodeOpen,
  frameHeader,
  FLAG_END,
  FrameType,
  type GoAwayPayload,
  helloFrame,
  type ResetPayload,
  WireError,
} from '../../lib/tunnel-framing/frames.js';
import { listening, until } from '../helpers/net.js';

/** The session under test (it opens, as the proxy does) and a raw answerer that records what it reads. */
async function rig(t: Test) {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const raw = connect(port, '127.0.0.1');
  raw.on('error', () => {});
  raw.write(helloFrame({ streamWindow: 1 << 20, connectionWindow: 16 << 20, maxStreams: 1000 }));
  const [socket] = await accepted;
  const session = new FramedSession(socket, { side: 'listener' });
  const errors: Array<GateError | undefined> = [];
  session.on('close', (error: GateError | undefined) => {
    errors.push(error);
    socket.destroy();
  });
  const opens: number[] = [];
  const resets = new Map<number, ResetPayload>();
  const goAways: GoAwayPayload[] = [];
  const reader = new FrameReader((type, _flags, id, payload) => {
    if (type === FrameType.OPEN) opens.push(id);
    if (type === FrameType.RESET) resets.set(id, decodeReset(payload));
    if (type === FrameType.GOAWAY) goAways.push(decodeGoAway(payload));
  });
  raw.on('data', (chunk: Buffer) => reader.push(chunk));
  await once(session, 'hello');
  t.teardown(() => {
    raw.destroy();
    socket.destroy();
    server.close();
  });
  return { session, raw, opens, resets, goAways, errors };
}

/** An ANSWER payload as a sender that breaks the rules might write it (encodeAnswer would not). */
function rawAnswer(status: number, code: string, reason: Buffer): Buffer {
  const codeBytes = Buffer.from(code, 'latin1');
  const head = Buffer.alloc(3);
  head.writeUInt16BE(status, 0);
  head[2] = codeBytes.length;
  return Buffer.concat([head, codeBytes, reason]);
}

function collect(stream: FramedStream): Promise<string> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(Buffer.from(chunk)));
  stream.resume();
  return once(stream, 'end').then(() => Buffer.concat(chunks).toString());
}

for (const [what, payload, reason] of [
  ['a code not [A-Z0-9_]*', rawAnswer(403, 'GATE_err', Buffer.alloc(0)), /code not \[A-Z0-9_\]\*/],
  ['a reason over 1 KiB', rawAnswer(502, 'GATE_ERR_DIAL_FAILED', Buffer.alloc(1025, 0x61)), /reason over 1 KiB/],
] as const) {
  t.test(`an ANSWER with ${what} resets its stream with PROTOCOL_ERROR; the other stream and the session go on`, async (t) => {
    const r = await rig(t);
    const bad = r.session.open({ kind: 0, target: 'bad:1', client: '' });
    const good = r.session.open({ kind: 0, target: 'good:1', client: '' });
    let badAnswered = false;
    bad.once('response', () => {
      badAnswered = true;
    });
    await until(() => r.opens.length === 2, 'both OPENs read');
    r.raw.write(controlFrame(FrameType.ANSWER, 0, bad.id, payload));
    await once(bad, 'close');
    t.notOk(badAnswered, 'the malformed answer was not handed to the opener');
    t.equal(bad.closeCode, WireError.PROTOCOL_ERROR, 'the stream closed with PROTOCOL_ERROR');
    t.match(bad.closeReason, reason, `and why: ${bad.closeReason}`);
    t.notOk(bad.closedByPeer, 'closed by this side');
    await until(() => r.resets.has(bad.id), 'the RESET reached the other side');
    t.equal(r.resets.get(bad.id)?.code, WireError.PROTOCOL_ERROR);

    // The other stream, on the same session: answered, carries its bytes, ends clean.
    const body = collect(good);
    r.raw.write(
      Buffer.concat([
        controlFrame(FrameType.ANSWER, 0, good.id, encodeAnswer({ status: 200, code: '', reason: '' })),
        frameHeader(FrameType.DATA, FLAG_END, good.id, 5),
        Buffer.from('still'),
      ]),
    );
    t.equal(await body, 'still', 'the second stream carried on');
    t.equal(good.answer?.status, 200);
    t.notOk(r.session.closed, 'the session is up');
    t.same(r.goAways, [], 'no GOAWAY');
    const third = r.session.open({ kind: 0, target: 'next:1', client: '' });
    await until(() => r.opens.includes(third.id), 'a new stream opens on the same session');
  });
}

t.test('a second ANSWER for a stream is still a session error (PROTOCOL_ERROR): the state is broken, not the content', async (t) => {
  const r = await rig(t);
  const stream = r.session.open({ kind: 0, target: 'x:1', client: '' });
  await until(() => r.opens.length === 1, 'the OPEN read');
  const ok = controlFrame(FrameType.ANSWER, 0, stream.id, encodeAnswer({ status: 200, code: '', reason: '' }));
  r.raw.write(Buffer.concat([ok, ok]));
  await until(() => r.goAways.length === 1, 'a GOAWAY');
  t.equal(r.goAways[0]?.code, WireError.PROTOCOL_ERROR);
  t.match(r.goAways[0]?.reason, /cannot answer/);
  await until(() => r.session.closed, 'the session ended');
});

t.test('an OPEN whose target is not printable is reset with PROTOCOL_ERROR; the session goes on', async (t) => {
  const r = await rig(t);
  // The raw side is the dialer: odd ids. A target with a space (0x20), its lengths adding up.
  const bad = encodeOpen({ kind: 0, target: 'ab:1', client: '' });
  bad[3] = 0x20;
  r.raw.write(controlFrame(FrameType.OPEN, 0, 1, bad));
  await until(() => r.resets.has(1), 'the RESET of the malformed OPEN');
  t.equal(r.resets.get(1)?.code, WireError.PROTOCOL_ERROR);
  t.match(r.resets.get(1)?.reason, /not printable ASCII/);
  t.same(r.goAways, [], 'no GOAWAY');
  t.notOk(r.session.closed, 'the session is up');
  const stream = r.session.open({ kind: 0, target: 'x:1', client: '' });
  await until(() => r.opens.includes(stream.id), 'and opens streams');
});
