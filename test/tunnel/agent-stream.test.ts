// The agent's side of a tunnel stream (serveAgentStream) on both of its transports: the target
// dialed as a bare handle and relayed by a StreamRelay (the default where Node offers the
// handles), and on net.Socket with splice (the fallback). A real HTTP/2 session over loopback
// carries CONNECT streams to real TCP targets; each transport must give the same answers.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import {
  connect as h2connect,
  constants,
  createServer as createH2Server,
  type ClientHttp2Stream,
  type ServerHttp2Stream,
} from 'node:http2';
import { createServer, type Socket } from 'node:net';
import { ErrorCodes } from '../../lib/errors.js';
import { serveAgentStream, type AgentTarget } from '../../lib/tunnel/agent-stream.js';
import { ERROR_CODE_HEADER } from '../../lib/tunnel/connect-request.js';
import { handlesAvailable } from '../../lib/transport/uv.js';
import { closeServer, listening, liveHandles, until } from '../helpers/net.js';
import { gone } from '../helpers/relay-checks.js';

const silent = { debug() {}, warn() {} } as never;

interface Agent {
  /** Opens a CONNECT stream to `target` and waits for its answer's headers. */
  connect(target: string): Promise<{ stream: ClientHttp2Stream; status: unknown; code: unknown }>;
  /** The targets the agent holds now (what `track` was told and not yet told closed). */
  targets: Set<AgentTarget>;
}

async function agent(t: Test, sockets: boolean): Promise<Agent> {
  const targets = new Set<AgentTarget>();
  const h2 = createH2Server();
  h2.on('stream', (stream: ServerHttp2Stream, headers) => {
    serveAgentStream(stream, headers, {
      allow: (target) => !target.startsWith('denied'),
      dialTimeoutMs: 5_000,
      log: silent,
      sockets,
      track: (target) => {
        targets.add(target);
        return () => targets.delete(target);
      },
    });
  });
  const port = await listening(h2 as never);
  const session = h2connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  t.teardown(async () => {
    session.destroy();
    await closeServer(h2 as never);
  });
  return {
    targets,
    connect: async (target) => {
      const stream = session.request({ ':method': 'CONNECT', ':authority': target });
      stream.on('error', () => {});
      const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
      return { stream, status: headers[':status'], code: headers[ERROR_CODE_HEADER] };
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

function text(input: NodeJS.ReadableStream): Promise<string> {
  const parts: Buffer[] = [];
  input.on('data', (c: Buffer) => parts.push(c));
  return once(input, 'end').then(() => Buffer.concat(parts).toString());
}

function closed(stream: ClientHttp2Stream): Promise<unknown> {
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
      const { stream, status } = await a.connect(tcp.address);
      t.equal(status, 200, 'answered 200 once dialed');
      const socket = await acceptedP;
      t.equal(a.targets.size, 1, 'the target is tracked');
      const answer = text(stream);
      stream.end('question');
      t.equal(await text(socket), 'question', 'the target read the bytes, then the FIN');
      socket.end('answer');
      t.equal(await answer, 'answer', 'the answer came back, then END_STREAM');
      await closed(stream);
      t.equal(stream.rstCode, constants.NGHTTP2_NO_ERROR, 'no reset');
      await until(() => a.targets.size === 0, 'the target untracked');
    });

    t.test('a target that resets: RST_STREAM CONNECT_ERROR (RFC 9113 §8.5)', async (t) => {
      const a = await agent(t, sockets);
      const tcp = await target(t);
      const acceptedP = tcp.accepted();
      const { stream } = await a.connect(tcp.address);
      const socket = await acceptedP;
      socket.resetAndDestroy();
      await closed(stream);
      t.equal(stream.rstCode, constants.NGHTTP2_CONNECT_ERROR);
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
      t.equal(stream.rstCode, constants.NGHTTP2_CONNECT_ERROR, 'the stream reset with CONNECT_ERROR');
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
      stream.close(constants.NGHTTP2_CANCEL);
      const socket = await acceptedP;
      t.ok(await gone(socket), 'the target connection was closed');
      await until(() => a.targets.size === 0, 'nothing tracked');
    });
  });
}

t.test('no socket left open', async () => {
  await until(() => liveHandles().sockets === 0, 'every socket closed');
});
