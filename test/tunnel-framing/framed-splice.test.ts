// The holder's hop on the framing (lib/tunnel-framing/framed-splice.ts): a proxy's stream on a
// peering session carried into a stream of the agent's tunnel, over real loopback connections.
// Checked: bytes exact both ways with the first flight sent before the answer, the answer passed
// back as the agent gave it, backpressure bounded across the hop, each reset passed on with its
// code and reason, and a lost peering session releasing the agent's stream.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import { spliceFramed } from '../../lib/tunnel-framing/framed-splice.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type AnswerPayload, type OpenPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { closeServer, listening } from '../helpers/net.js';
import { digest, payload, send, stalled } from '../helpers/relay-checks.js';

const WINDOWS = { streamWindow: 64 * 1024, connectionWindow: 256 * 1024 };

/** Two connected sessions: `dialer` opens odd ids, `listener` even. */
async function sessions(t: Test, onOpen: (stream: FramedStream, open: OpenPayload) => void): Promise<[FramedSession, FramedSession]> {
  const server = createServer();
  const port = await listening(server);
  const dialled = connect(port, '127.0.0.1');
  const [accepted] = (await once(server, 'connection')) as [Socket];
  const answering = new FramedSession(dialled, { side: 'dialer', onOpen, ...WINDOWS });
  const opening = new FramedSession(accepted, { side: 'listener', ...WINDOWS });
  t.teardown(async () => {
    answering.destroy();
    opening.destroy();
    await closeServer(server);
  });
  return [opening, answering];
}

/** Proxy -> holder (peering) -> agent: the agent's streams go to `agentOnOpen`. */
async function hop(t: Test, agentOnOpen: (stream: FramedStream, open: OpenPayload) => void) {
  const [holderToAgent, agent] = await sessions(t, agentOnOpen);
  const [proxy, holder] = await sessions(t, (inbound, open) => spliceFramed(inbound, holderToAgent.open(open)));
  return { proxy, holder, holderToAgent, agent };
}

const open = (proxy: FramedSession): FramedStream => proxy.open({ kind: StreamKind.CONNECT, target: 'db:5432', client: '10.0.0.9:4000' });

t.test('8 MiB through the hop and back, the first flight before the answer, every stream closed clean', async (t) => {
  const opens: OpenPayload[] = [];
  const agentStreams: FramedStream[] = [];
  const { proxy } = await hop(t, (stream, o) => {
    opens.push(o);
    agentStreams.push(stream);
    echoFramed(stream);
  });
  const stream = open(proxy);
  const up = payload(11, 8 << 20);
  const echoed = digest(stream);
  send(stream, up.chunks);
  const [answer] = (await once(stream, 'response')) as [AnswerPayload];
  t.equal(answer.status, 200);
  t.equal(await echoed, up.sha, 'every byte came back, in order');
  if (!stream.closed) await once(stream, 'close');
  t.equal(stream.closeCode, undefined, "the proxy's stream closed by both FINs");
  t.equal(agentStreams[0]?.closeCode, undefined, "and the agent's");
  t.same(opens, [{ kind: 0, target: 'db:5432', client: '10.0.0.9:4000' }], 'the open reached the agent as it was sent');
});

t.test("a paused proxy reader holds the agent's writer back across the hop, and nothing is lost", async (t) => {
  let agentStream: FramedStream | undefined;
  const { proxy } = await hop(t, (stream) => {
    agentStream = stream;
    stream.respond({ status: 200, code: '', reason: '' });
    stream.resume();
  });
  const stream = open(proxy);
  await once(stream, 'response');
  const down = payload(12, 8 << 20);
  const progress = send(agentStream!, down.chunks);
  await stalled(progress);
  t.ok(progress.sent < 2 << 20, `the agent stalled after ${progress.sent} bytes (two windows and the sockets' buffers)`);
  t.equal(await digest(stream), down.sha, 'every byte arrived once the proxy read');
});

t.test("a refusal comes back with the agent's code and reason", async (t) => {
  const { proxy, holder } = await hop(t, (stream) =>
    stream.respond({ status: 403, code: 'GATE_ERR_AGENT_TARGET_DENIED', reason: 'this agent does not serve db:5432' }),
  );
  const stream = open(proxy);
  const [answer] = (await once(stream, 'response')) as [AnswerPayload];
  t.same(answer, { status: 403, code: 'GATE_ERR_AGENT_TARGET_DENIED', reason: 'this agent does not serve db:5432' });
  if (!stream.closed) await once(stream, 'close');
  t.equal(stream.closeCode, WireError.REFUSED_STREAM);
  t.equal(holder.openStreams, 0, 'the holder keeps nothing');
});

t.test('a reset on either side reaches the other with its code and reason', async (t) => {
  const agentStreams: FramedStream[] = [];
  const { proxy } = await hop(t, (stream) => {
    agentStreams.push(stream);
    stream.respond({ status: 200, code: '', reason: '' });
    stream.resume();
  });
  const first = open(proxy);
  await once(first, 'response');
  const closed = once(first, 'close');
  agentStreams[0]!.reset(WireError.CONNECT_ERROR, 'the target connection failed');
  await closed;
  t.same(
    [first.closeCode, first.closeReason],
    [WireError.CONNECT_ERROR, 'the target connection failed'],
    "the agent's reset reached the proxy",
  );

  const second = open(proxy);
  await once(second, 'response');
  const agentClosed = once(agentStreams[1]!, 'close');
  second.reset(WireError.CANCEL, 'client gone');
  await agentClosed;
  t.same(
    [agentStreams[1]!.closeCode, agentStreams[1]!.closeReason],
    [WireError.CANCEL, 'client gone'],
    "the proxy's reset reached the agent",
  );
});

t.test("a lost peering session releases the agent's streams", async (t) => {
  const agentStreams: FramedStream[] = [];
  const { proxy, holderToAgent } = await hop(t, (stream) => {
    agentStreams.push(stream);
    stream.respond({ status: 200, code: '', reason: '' });
    stream.resume();
  });
  const stream = open(proxy);
  await once(stream, 'response');
  const agentClosed = once(agentStreams[0]!, 'close');
  proxy.destroy();
  await agentClosed;
  t.equal(agentStreams[0]!.closeCode, WireError.CANCEL, 'reset CANCEL');
  t.equal(holderToAgent.openStreams, 0, "the holder's stream to the agent is gone too");
});
