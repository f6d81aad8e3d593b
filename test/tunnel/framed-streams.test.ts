// One stream of a framed tunnel end to end, with the agent's per-stream code
// (lib/tunnel/agent-stream.ts) and the proxy's wait for its answer (lib/tunnel/framed-answer.ts)
// on a real framed session over loopback TCP, and real targets: an echo server, a closed port.
// Checked: the policy and the target's syntax are refused with their codes, an unreachable target
// with the dial's, the client's first flight reaches the target first, a client that leaves while
// the agent dials releases the stream with a FIN (no reset), so does no answer in time, and the
// socket fallback carries the same bytes and resets as the bare-handle relay.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { DialCancel } from '../../lib/transport/dial-cancel.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type OpenPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { serveAgentStream } from '../../lib/tunnel/agent-stream.js';
import { awaitFramedAnswer } from '../../lib/tunnel/framed-answer.js';
import { closeServer, listening } from '../helpers/net.js';
import { componentLogger } from '../../lib/log.js';

interface Rig {
  proxy: FramedSession;
  agent: FramedSession;
  echoPort: number;
  closedPort: number;
  /** Every stream the agent saw close, with its code. */
  agentClosed: (number | undefined)[];
}

async function rig(t: Test, serve?: (stream: FramedStream, open: OpenPayload) => void, sockets = false): Promise<Rig> {
  const echo = createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    s.on('data', (chunk) => s.write(chunk));
    s.once('end', () => s.end());
  });
  const echoPort = await listening(echo);
  const gone = createServer();
  const closedPort = await listening(gone);
  await closeServer(gone);
  const tunnel = createServer();
  const tunnelPort = await listening(tunnel);
  const agentSocket = connect(tunnelPort, '127.0.0.1');
  const [proxySocket] = (await once(tunnel, 'connection')) as [Socket];
  const agentClosed: (number | undefined)[] = [];
  const log = componentLogger(undefined, 'test');
  const agent = new FramedSession(agentSocket, {
    side: 'dialer',
    onOpen: (stream, open) => {
      stream.once('close', () => agentClosed.push(stream.closeCode));
      if (serve) return serve(stream, open);
      serveAgentStream(stream, open, {
        allow: (target) => target !== `127.0.0.1:22`,
        dialTimeoutMs: 5_000,
        log,
        track: () => undefined,
        sockets,
      });
    },
  });
  const proxy = new FramedSession(proxySocket, { side: 'listener' });
  t.teardown(async () => {
    proxy.destroy();
    agent.destroy();
    await Promise.all([closeServer(echo), closeServer(tunnel)]);
  });
  return { proxy, agent, echoPort, closedPort, agentClosed };
}

/** Opens `target` and waits for the answer, with the registry's messages. */
function openAndWait(proxy: FramedSession, target: string, first?: Buffer, cancel?: DialCancel, timeoutMs = 5_000): Promise<FramedStream> {
  const stream = proxy.open({ kind: StreamKind.CONNECT, target, client: '10.1.2.3:4567' });
  if (first) stream.write(first);
  const where = `agent test -> ${target}`;
  return awaitFramedAnswer(stream, {
    timeoutMs,
    cancel,
    where,
    refused: (refusal) => {
      const code = refusal.code === ErrorCodes.AGENT_TARGET_DENIED ? ErrorCodes.AGENT_TARGET_DENIED : ErrorCodes.AGENT_STREAM_FAILED;
      return new GateError(code, `${where}: ${refusal.message}${refusal.code && refusal.code !== code ? ` (${refusal.code})` : ''}`);
    },
    lost: () => new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: lost`),
    timedOut: () => new GateError(ErrorCodes.AGENT_STREAM_FAILED, `${where}: no answer within ${timeoutMs} ms`),
  });
}

function text(stream: FramedStream): Promise<string> {
  const parts: Buffer[] = [];
  stream.on('data', (c: Buffer) => parts.push(Buffer.from(c)));
  const ended = once(stream, 'end');
  stream.resume();
  return ended.then(() => Buffer.concat(parts).toString());
}

for (const sockets of [false, true]) {
  t.test(
    `an allowed target (${sockets ? 'net.Socket fallback' : 'bare handles'}): the first flight first, then both ways, clean close`,
    async (t) => {
      const { proxy, echoPort, agentClosed } = await rig(t, undefined, sockets);
      const stream = await openAndWait(proxy, `127.0.0.1:${echoPort}`, Buffer.from('first flight|'));
      const echoed = text(stream);
      stream.write(Buffer.from('second'));
      stream.end();
      t.equal(await echoed, 'first flight|second', 'the bytes sent before the answer reached the target first');
      if (!stream.closed) await once(stream, 'close');
      t.equal(stream.closeCode, undefined, 'closed by both FINs');
      t.same(agentClosed, [undefined], 'and so at the agent');
    },
  );
}

t.test('refusals carry their codes: the policy, the syntax, the kind, an unreachable target', async (t) => {
  const { proxy, closedPort } = await rig(t);
  await t.rejects(openAndWait(proxy, '127.0.0.1:22'), { code: ErrorCodes.AGENT_TARGET_DENIED, message: /does not serve 127\.0\.0\.1:22/ });
  await t.rejects(openAndWait(proxy, 'no-port-here'), { code: ErrorCodes.AGENT_STREAM_FAILED, message: /GATE_ERR_TARGET_INVALID/ });
  await t.rejects(openAndWait(proxy, `127.0.0.1:${closedPort}`), {
    code: ErrorCodes.AGENT_STREAM_FAILED,
    message: /refused the connection \(GATE_ERR_DIAL_REFUSED\)/,
  });
  const other = proxy.open({ kind: 7, target: 'x:1', client: '' });
  const [answer] = (await once(other, 'response')) as [{ status: number; code: string }];
  t.same([answer.status, answer.code], [400, ErrorCodes.TARGET_INVALID], 'a kind the agent does not serve');
  t.equal(proxy.openStreams, 0, 'no stream left open');
});

t.test('a client that leaves while the agent dials releases the stream with a FIN, not a reset', async (t) => {
  let taken: FramedStream | undefined;
  const { proxy, agentClosed } = await rig(t, (stream) => {
    taken = stream; // never answers: the agent is still "dialling"
  });
  const cancel = new DialCancel();
  const opened = openAndWait(proxy, 'slow:1', Buffer.from('hello'), cancel);
  while (!taken) await new Promise((resolve) => setTimeout(resolve, 5));
  cancel.cancel(new Error('client left'));
  await t.rejects(opened, { code: ErrorCodes.DIAL_ABORTED });
  // The agent sees the FIN; a real agent would end its side once its target has: here by hand.
  const agentSide = taken;
  const ended = once(agentSide, 'end');
  agentSide.resume();
  await ended;
  const closed = once(agentSide, 'close');
  agentSide.respond({ status: 200, code: '', reason: '' });
  agentSide.end();
  await closed;
  t.same(agentClosed, [undefined], 'closed by two FINs: no reset reached the agent');
});

t.test('no answer in time: the open fails, the stream is released with a FIN, never reset before its answer', async (t) => {
  // A reset before the answer is what the agent's rapid-reset budget counts (issue 37): the
  // stream keeps its slot and waits for the answer; its release grace starts then.
  let seen: FramedStream | undefined;
  const { proxy, agentClosed } = await rig(t, (stream) => {
    seen = stream;
  });
  await t.rejects(openAndWait(proxy, 'silent:1', undefined, undefined, 100), {
    code: ErrorCodes.AGENT_STREAM_FAILED,
    message: /no answer within 100 ms/,
  });
  while (!seen?.finReceived) await new Promise((resolve) => setTimeout(resolve, 5));
  t.ok(seen.finReceived, 'the agent got the FIN');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.same(agentClosed, [], 'and no reset');
  t.equal(proxy.openStreams, 1, 'the stream keeps its slot until the answer');
});

t.test('the session lost before the answer: the open fails as lost', async (t) => {
  const { proxy, agent } = await rig(t, () => {});
  const opened = openAndWait(proxy, 'x:1');
  await new Promise((resolve) => setTimeout(resolve, 20));
  agent.destroy();
  await t.rejects(opened, { code: ErrorCodes.AGENT_STREAM_FAILED, message: /lost/ });
});

for (const sockets of [false, true]) {
  t.test(
    `a target that resets (${sockets ? 'net.Socket fallback' : 'bare handles'}): the stream is reset with CONNECT_ERROR`,
    async (t) => {
      const { proxy, agentClosed } = await rig(t, undefined, sockets);
      const resetting = createServer((s) => {
        s.on('error', () => {});
        s.once('data', () => s.resetAndDestroy());
      });
      const port = await listening(resetting);
      t.teardown(() => closeServer(resetting));
      const stream = await openAndWait(proxy, `127.0.0.1:${port}`, Buffer.from('hello'));
      const closed = once(stream, 'close');
      stream.resume();
      await closed;
      t.equal(stream.closeCode, WireError.CONNECT_ERROR, 'the proxy sees CONNECT_ERROR');
      t.same(agentClosed, [WireError.CONNECT_ERROR], 'reset by the agent');
    },
  );
}
