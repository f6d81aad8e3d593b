// The opener keeps under the other side's stream limit (docs/tunnel-framing.md, "Streams",
// "Opening"): once the other side's HELLO said how many of this side's streams it takes, an open
// past it fails here at once with GATE_ERR_AGENT_BUSY and sends nothing, where the other side
// would refuse it (RESET REFUSED_STREAM) and count it against its reset budget. Two real sessions
// over loopback TCP.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { FramedSession, type FramedSessionOptions } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { listening } from '../helpers/net.js';

/** An opener and an answerer over loopback, once each has read the other's HELLO. */
async function pair(t: Test, answererOptions: Partial<FramedSessionOptions>): Promise<{ opener: FramedSession; answerer: FramedSession }> {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  const answerer = new FramedSession(client, { side: 'dialer', ...answererOptions });
  const opener = new FramedSession(socket, { side: 'listener' });
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  await Promise.all([once(opener, 'hello'), once(answerer, 'hello')]);
  return { opener, answerer };
}

const target = (n: number) => ({ kind: 0, target: `t${n}:1`, client: '' });

t.test("an open past the other side's HELLO limit fails here, busy, with nothing sent; a slot freed opens again", async (t) => {
  const taken: FramedStream[] = [];
  const { opener } = await pair(t, {
    maxConcurrentStreams: 2,
    onOpen: (stream) => {
      taken.push(stream);
      echoFramed(stream);
    },
  });
  t.equal(opener.streamLimit, 2, "the limit is the answerer's HELLO's");
  const a = opener.open(target(1));
  const b = opener.open(target(2));
  await Promise.all([once(a, 'response'), once(b, 'response')]);
  const err = t.throws(() => opener.open(target(3))) as GateError;
  t.ok(err instanceof GateError && err.code === ErrorCodes.AGENT_BUSY, `GATE_ERR_AGENT_BUSY: ${err.message}`);
  t.match(err.message, /takes 2 at once/);
  t.equal(opener.openStreams, 2, 'no stream left behind');

  // The first stream ends both ways (FINs, no reset): its slot comes back, and the next open takes
  // the next id (the refused one took none) and reaches the answerer, the third it ever saw.
  a.resume();
  a.end();
  await once(a, 'close');
  const c = opener.open(target(4));
  t.equal(c.id, b.id + 2, 'the failed open took no id');
  await once(c, 'response');
  t.equal(taken.length, 3, 'the answerer saw only the opens within its limit');
  t.same(
    taken.map((s) => s.id),
    [a.id, b.id, c.id],
  );
  t.notOk(b.closed, 'the second stream carried on');
});

t.test('a side whose HELLO says it takes no streams is never sent an OPEN', async (t) => {
  const { opener } = await pair(t, {});
  t.equal(opener.peerLimits?.maxStreams, 0, 'its HELLO said 0');
  t.throws(() => opener.open(target(1)), { code: ErrorCodes.AGENT_BUSY });
  t.equal(opener.openStreams, 0);
  t.notOk(opener.closed, 'the session goes on');
});

t.test('before the HELLO the default limit is assumed: opens go out, and the other side judges them', async (t) => {
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
  const opener = new FramedSession(socket, { side: 'listener' });
  t.equal(opener.peerLimits, undefined, 'no HELLO read yet');
  t.equal(opener.streamLimit, 1000, 'the default is assumed');
  const early = opener.open(target(1));
  t.equal(opener.openStreams, 1, 'the open was taken');
  // The other side takes one stream: it answers the early open within its limit.
  const answerer = new FramedSession(client, { side: 'dialer', maxConcurrentStreams: 1, onOpen: echoFramed });
  t.teardown(() => answerer.destroy());
  await once(early, 'response');
  t.equal(opener.streamLimit, 1, 'then the HELLO says');
  t.throws(() => opener.open(target(2)), { code: ErrorCodes.AGENT_BUSY });
});
