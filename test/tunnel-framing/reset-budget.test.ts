// What a framed session charges to the other side's rapid-reset budget, and what the opener's
// side (the proxy) never spends (lib/tunnel-framing/framed-session.ts spendReset, framed-relay.ts
// releaseFramedStream, issue 37): a stream reset before its answer counts, one reset after it
// does not; a stream both of whose FINs have crossed leaves the concurrency limit even while its
// last bytes wait unread; a released stream is reset only after its answer. Real sessions over
// loopback TCP, with a budget of nothing, so that a single counted reset would end the session.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { FramedSession, type FramedSessionOptions } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { releaseFramedStream } from '../../lib/tunnel-framing/framed-relay.js';
import { type AnswerPayload, type GoAwayPayload, type OpenPayload, WireError } from '../../lib/tunnel-framing/frames.js';
import { listening, until } from '../helpers/net.js';

type OnOpen = (stream: FramedStream, open: OpenPayload) => void;

/** The proxy's side (`opener`, the listener) and the agent's (`answerer`, the dialer, with `options`). */
async function pair(t: Test, onOpen: OnOpen, options: Partial<FramedSessionOptions> = {}) {
  const server = createServer();
  const port = await listening(server);
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect(port, '127.0.0.1');
  const [socket] = await accepted;
  const answerer = new FramedSession(client, { side: 'dialer', onOpen, ...options });
  const opener = new FramedSession(socket, { side: 'listener' });
  const goAways: GoAwayPayload[] = [];
  opener.on('goaway', (g: GoAwayPayload) => goAways.push(g));
  t.teardown(() => {
    client.destroy();
    socket.destroy();
    server.close();
  });
  return { opener, answerer, goAways };
}

const target = (i: number): OpenPayload => ({ kind: 0, target: `t${i}:1`, client: '' });

/** A budget of nothing: the first counted reset ends the session. */
const NO_BUDGET = { resetBurst: 0, resetsPerSecond: 0 };

t.test('streams reset after their answer spend none of the budget', async (t) => {
  const { opener, answerer, goAways } = await pair(t, (stream) => stream.respond({ status: 200, code: '', reason: '' }), NO_BUDGET);
  for (let i = 0; i < 30; i++) {
    const stream = opener.open(target(i));
    await once(stream, 'response');
    stream.reset(WireError.CANCEL, 'the client left');
  }
  const last = opener.open(target(99));
  const [answer] = (await once(last, 'response')) as [AnswerPayload];
  t.equal(answer.status, 200, 'the session still takes streams after 30 resets');
  t.same(goAways, [], 'no GOAWAY');
  t.notOk(answerer.closed || opener.closed);
});

t.test('a stream reset before its answer is a rapid reset: past the budget the session ends with ENHANCE_YOUR_CALM', async (t) => {
  const { opener, goAways } = await pair(t, () => {}, { resetBurst: 5, resetsPerSecond: 0 });
  for (let i = 0; i < 6; i++) opener.open(target(i)).reset(WireError.CANCEL, 'gone');
  await until(() => goAways.length > 0, 'the GOAWAY');
  t.equal(goAways[0]?.code, WireError.ENHANCE_YOUR_CALM);
  t.match(goAways[0]?.reason, /rapid reset/);
});

t.test('a stream whose FINs have both crossed leaves the limit, though its last bytes wait unread', async (t) => {
  // The answerer's reader never reads (a target that stopped reading): the opener's bytes and FIN
  // stay held there. The opener has both FINs and closes; at a limit of one, its next open is taken.
  const { opener, goAways } = await pair(
    t,
    (stream) => {
      stream.respond({ status: 200, code: '', reason: '' });
      stream.end();
    },
    { maxConcurrentStreams: 1, ...NO_BUDGET },
  );
  const first = opener.open(target(1));
  first.write(Buffer.from('unread'));
  first.end();
  first.resume();
  await once(first, 'close');
  t.equal(first.closeCode, undefined, 'closed cleanly on the opener side');
  const second = opener.open(target(2));
  // Refused, the stream closes without an answer: either outcome ends the wait.
  const answer = await Promise.race([
    once(second, 'response').then(([a]) => a as AnswerPayload),
    once(second, 'close').then(() => undefined),
  ]);
  t.equal(answer?.status, 200, 'the next open is within the limit, not refused');
  t.same(goAways, []);
});

t.test('a stream released before its answer waits for it, and is reset only after its grace', async (t) => {
  const answered: FramedStream[] = [];
  let resetWhileUnanswered = false;
  const { opener, goAways } = await pair(
    t,
    (stream) => {
      stream.once('close', () => {
        if (!stream.answered) resetWhileUnanswered = true;
      });
      // The agent's dial takes a while; the target then ignores the FIN and never ends.
      setTimeout(() => {
        stream.respond({ status: 200, code: '', reason: '' });
        answered.push(stream);
      }, 300);
    },
    NO_BUDGET,
  );
  const stream = opener.open(target(1));
  releaseFramedStream(stream, 50);
  await until(() => answered.length === 1, 'the answer');
  await once(stream, 'close');
  t.equal(stream.closeCode, WireError.CANCEL, 'reset in the end, its target never having closed');
  t.notOk(resetWhileUnanswered, 'never before the answer');
  t.same(goAways, [], 'no GOAWAY: the reset spent nothing');
  const next = opener.open(target(2));
  const [answer] = (await once(next, 'response')) as [AnswerPayload];
  t.equal(answer.status, 200, 'the session goes on');
});
