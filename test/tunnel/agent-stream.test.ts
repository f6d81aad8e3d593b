// The agent's side of a tunnel stream (serveAgentStream) on both of its transports: the target
// dialed as a bare handle and relayed by a FramedRelay (the default where Node offers the
// handles), and on net.Socket with splice (the fallback). A real framed session over loopback
// carries client streams to real TCP targets; each transport must give the same answers, and the
// agent must hold no target connection past its stream. (test/tunnel/framed-streams.test.ts has
// the opener's side: first bytes, cancels, timeouts.)
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { ErrorCodes } from '../../lib/errors.js';
import { FramedDuplex } from '../../lib/tunnel-framing/framed-duplex.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { type AnswerPayload, StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { serveAgentStream, type AgentTarget } from '../../lib/tunnel/agent-stream.js';
import { handlesAvailable } from '../../lib/transport/uv.js';
import { closeServer, listening, liveHandles, until } from '../helpers/net.js';
import { gone } from '../helpers/relay-checks.js';

const silent = { debug() {}, warn() {} } as never;

interface Agent {
  /** Opens a client stream to `target` and waits for its answer. */
  connect(target: string): Promise<{ stream: FramedStream; duplex: FramedDuplex; status: number; code: string }>;
  /** The targets the agent holds now (what `track` was told and not yet told closed). */
  targets: Set<AgentTarget>;
}

async function agent(t: Test, sockets: boolean): Promise<Agent> {
  const targets = new Set<AgentTarget>();
  const tunnel = createServer();
  const port = await listening(tunnel);
  const agentSocket = connect(port, '127.0.0.1');
  const [proxySocket] = (await once(tunnel, 'connection')) as [Socket];
  const agentSession = new FramedSession(agentSocket, {
    side: 'dialer',
    onOpen: (stream, open) =>
      serveAgentStream(stream, open, {
        allow: (target) => !target.startsWith('denied'),
        dialTimeoutMs: 5_000,
        log: silent,
        sockets,
        track: (target) => {
          targets.add(target);
          return () => targets.delete(target);
        },
      }),
  });
  const proxy = new FramedSession(proxySocket, { side: 'listener' });
  t.teardown(async () => {
    proxy.destroy();
    agentSession.destroy();
    await closeServer(tunnel);
  });
  return {
    targets,
    connect: async (target) => {
      const stream = proxy.open({ kind: StreamKind.CONNECT, target, client: '' });
      const [answer] = (await once(stream, 'response')) as [AnswerPayload];
      const duplex = new FramedDuplex(stream);
      duplex.on('error', () => {});
      return { stream, duplex, status: answer.status, code: answer.code };
    },
  };
}

/** A TCP target; `accepted` resolves with its next connection. */
async function target(t: Test): Promise<{ address: string; accepted: () => Promise<Socket> }> {
  const waiting: Array<(s: Socket) => void> = [];
  const held: Socket[] = [];
  const server = createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    held.push(s);
    waiting.shift()?.(s);
  });
  const port = await listening(server);
  t.teardown(async () => {
    for (const s of held) s.destroy();
    await closeServer(server);
  });
  return { address: `127.0.0.1:${port}`, accepted: () => new Promise((resolve) => waiting.push(resolve)) };
}

function text(input: Readable): Promise<string> {
  const parts: Buffer[] = [];
  input.on('data', (c: Buffer) => parts.push(c));
  return once(input, 'end').then(() => Buffer.concat(parts).toString());
}

function closed(stream: FramedStream): Promise<unknown> {
  return stream.closed ? Promise.resolve() : new Promise((resolve) => stream.once('close', resolve));
}

const transports: Array<[string, boolean]> = handlesAvailable
  ? [
      ['bare handles', false],
      ['net.Socket', true],
    ]
  : [['net.Socket', true]];
for (const [name, sockets] of transports) {
  t.test(`the agent on ${name}`, async (t) => {
    t.test('bytes both ways, half-close each way, the target untracked once closed', async (t) => {
      const a = await agent(t, sockets);
      const tcp = await target(t);
      const acceptedP = tcp.accepted();
      const { stream, duplex, status } = await a.connect(tcp.address);
      t.equal(status, 200, 'answered 200 once dialed');
      const socket = await acceptedP;
      t.equal(a.targets.size, 1, 'the target is tracked');
      const answer = text(duplex);
      duplex.end('question');
      t.equal(await text(socket), 'question', 'the target read the bytes, then the FIN');
      socket.end('answer');
      t.equal(await answer, 'answer', 'the answer came back, then the FIN');
      await closed(stream);
      t.equal(stream.closeCode ?? WireError.NO_ERROR, WireError.NO_ERROR, 'no reset');
      await until(() => a.targets.size === 0, 'the target untracked');
    });

    t.test('a target that resets: the stream is reset with CONNECT_ERROR', async (t) => {
      const a = await agent(t, sockets);
      const tcp = await target(t);
      const acceptedP = tcp.accepted();
      const { stream } = await a.connect(tcp.address);
      const socket = await acceptedP;
      socket.resetAndDestroy();
      await closed(stream);
      t.equal(stream.closeCode, WireError.CONNECT_ERROR);
      await until(() => a.targets.size === 0, 'the target untracked');
    });

    t.test('destroying a tracked target (the agent stopping) resets its stream and closes the connection', async (t) => {
      const a = await agent(t, sockets);
      const tcp = await target(t);
      const acceptedP = tcp.accepted();
      const { stream } = await a.connect(tcp.address);
      const socket = await acceptedP;
      for (const held of a.targets) held.destroy();
      await closed(stream);
      t.equal(stream.closeCode, WireError.CONNECT_ERROR, 'the stream reset with CONNECT_ERROR');
      t.ok(await gone(socket), 'the target connection was closed');
      await until(() => a.targets.size === 0, 'the target untracked');
    });

    t.test('a refused dial and a denied target are answered with their codes', async (t) => {
      const a = await agent(t, sockets);
      const probe = createServer();
      const port = await listening(probe);
      await closeServer(probe);
      const refused = await a.connect(`127.0.0.1:${port}`);
      t.equal(refused.code, ErrorCodes.DIAL_REFUSED, 'GATE_ERR_DIAL_REFUSED');
      const denied = await a.connect('denied.example:1');
      t.equal(denied.code, ErrorCodes.AGENT_TARGET_DENIED, 'GATE_ERR_AGENT_TARGET_DENIED');
      t.equal(a.targets.size, 0, 'nothing tracked');
    });

    t.test('a stream the proxy resets closes its target connection', async (t) => {
      const a = await agent(t, sockets);
      const tcp = await target(t);
      const acceptedP = tcp.accepted();
      const { stream } = await a.connect(tcp.address);
      stream.reset(WireError.CANCEL);
      const socket = await acceptedP;
      t.ok(await gone(socket), 'the target connection was closed');
      await until(() => a.targets.size === 0, 'nothing tracked');
    });
  });
}

t.test('no socket left open', async () => {
  await until(() => liveHandles().sockets === 0, 'every socket closed');
});
