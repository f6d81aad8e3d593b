// Stream ids (lib/tunnel-framing/stream-table.ts, docs/tunnel-framing.md "Stream ids"): a side
// that takes its last id sends GOAWAY NO_ERROR with it, finishes its streams and opens no more;
// the other side sees a clean GOAWAY. Two real sessions over loopback TCP, the opener started
// near the end of its ids (its `firstStreamId`).
import t from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { ErrorCodes, type GateError } from '../../lib/errors.js';
import { FramedSession, MAX_STREAM_ID } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type GoAwayPayload, WireError } from '../../lib/tunnel-framing/frames.js';
import { StreamTable } from '../../lib/tunnel-framing/stream-table.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { listening, until } from '../helpers/net.js';

function roundTrip(stream: FramedStream, text: string): Promise<string> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(Buffer.from(chunk)));
  stream.resume();
  stream.write(Buffer.from(text));
  stream.end();
  return once(stream, 'end').then(() => Buffer.concat(chunks).toString());
}

t.test('a side that runs out of stream ids says so with GOAWAY NO_ERROR, finishes its streams, and opens no more', async (t) => {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  // The dialer opens odd ids: two are left, MAX_STREAM_ID - 2 and MAX_STREAM_ID.
  const opener = new FramedSession(client, { side: 'dialer', firstStreamId: MAX_STREAM_ID - 2 });
  const answerer = new FramedSession(socket, { side: 'listener', onOpen: (stream) => echoFramed(stream) });
  const goAways: GoAwayPayload[] = [];
  answerer.on('goaway', (goAway: GoAwayPayload) => goAways.push(goAway));
  const closes: Array<GateError | undefined> = [];
  opener.on('close', (error: GateError | undefined) => closes.push(error));
  answerer.on('close', (error: GateError | undefined) => closes.push(error));

  const first = opener.open({ kind: 0, target: 'a:1', client: '' });
  t.notOk(opener.closing, 'one id left: the session still opens');
  const last = opener.open({ kind: 0, target: 'b:1', client: '' });
  t.equal(last.id, MAX_STREAM_ID, 'the last id, 2^31-1');
  t.ok(opener.closing, 'no id left: the session takes no new streams');
  t.throws(() => opener.open({ kind: 0, target: 'c:1', client: '' }), {
    code: ErrorCodes.AGENT_STREAM_FAILED,
    message: /stream ids exhausted/,
  });

  t.equal(await roundTrip(first, 'one'), 'one', 'the streams opened before still carry their bytes');
  t.equal(await roundTrip(last, 'two'), 'two');
  await until(() => goAways.length > 0, 'the GOAWAY');
  t.same(goAways[0], { lastStreamId: 0, code: WireError.NO_ERROR, reason: 'stream ids exhausted' }, 'the other side was told why');
  await until(() => closes.length === 2, 'both sessions closed');
  t.same(closes, [undefined, undefined], 'each ended clean once its streams had finished');
});

t.test('a stream table hands out its side’s ids in order, and none past 2^31-1', async (t) => {
  const table = new StreamTable('listener', MAX_STREAM_ID - 3);
  t.equal(table.takeId(), MAX_STREAM_ID - 3);
  t.equal(table.takeId(), MAX_STREAM_ID - 1, 'the listener’s last even id');
  t.notOk(table.idsLeft);
  t.equal(table.takeId(), undefined, 'then none');
  t.throws(() => new StreamTable('dialer', 2), RangeError, 'a dialer’s ids are odd');
});
