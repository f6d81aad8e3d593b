// The relay between a bare TCP handle and an HTTP/2 stream (transport/stream-relay.ts), on real
// loopback sockets and a real HTTP/2 session: the agent's side of a tunnel. A client session opens
// a CONNECT stream; the server dials a TCP "target" as a bare handle (dialHandle, transport/handle-dial.ts) and
// relays the stream to it. Checked: bytes exact both ways under slow readers, backpressure bounded
// each way, half-close each way, a reset on each side and the code the other side sees, no handle
// left behind.
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
import { dialHandle } from '../../lib/transport/handle-dial.js';
import { ErrorCodes, GateError } from '../../lib/errors.js';
import { StreamRelay, type StreamRelayFailure } from '../../lib/transport/stream-relay.js';
import { closeHandle, handlesAvailable, type TcpHandle } from '../../lib/transport/uv.js';
import { closeServer, listening, liveHandles, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { digest, gone, payload, send, stalled } from '../helpers/relay-checks.js';

const MiB = 1 << 20;
/** Far more than every buffer on the way (socket buffers, the stream's 64 KiB window) holds. */
const BULK = 24 * MiB;

interface Rig {
  /** The target's side of the relayed TCP connection, once accepted. */
  target: Promise<Socket>;
  /** The client's end of the stream, answered 200. */
  stream: ClientHttp2Stream;
  /** The relay's end report. */
  closed: Promise<StreamRelayFailure | undefined>;
}

/**
 * A target server, an h2c server whose streams are relayed to it, a client session; torn down
 * with the test, after which no socket may be left open.
 */
async function rig(t: Test): Promise<Rig> {
  const accepted: Socket[] = [];
  let onAccept: (s: Socket) => void = () => {};
  const targetServer = createServer({ allowHalfOpen: true }, (s) => {
    accepted.push(s);
    s.on('error', () => {});
    onAccept(s);
  });
  const targetPort = await listening(targetServer);
  let onClosed: (f: StreamRelayFailure | undefined) => void = () => {};
  const closed = new Promise<StreamRelayFailure | undefined>((resolve) => (onClosed = resolve));
  const h2 = createH2Server();
  h2.on('stream', (stream: ServerHttp2Stream) => {
    stream.on('error', () => {});
    dialHandle('127.0.0.1', targetPort, { timeoutMs: 5_000 }, (outcome) => {
      if (outcome instanceof GateError) throw outcome;
      stream.respond({ ':status': 200 });
      new StreamRelay(outcome, stream, {
        release: (s) => s.close(constants.NGHTTP2_CONNECT_ERROR),
        onClose: onClosed,
      }).start();
    });
  });
  const h2Port = await listening(h2 as never);
  const session = h2connect(`http://127.0.0.1:${h2Port}`);
  session.on('error', () => {});
  const target = new Promise<Socket>((resolve) => (onAccept = resolve));
  const stream = session.request({ ':method': 'CONNECT', ':authority': 'target:1' });
  stream.on('error', () => {});
  const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
  t.equal(headers[':status'], 200, 'the stream was answered');
  t.teardown(async () => {
    for (const s of accepted) s.destroy();
    session.destroy();
    await Promise.all([closeServer(targetServer), closeServer(h2 as never)]);
    await until(() => liveHandles().sockets === 0, 'every socket closed');
  });
  return { target, stream, closed };
}

t.test('the relay on bare handles', { skip: handlesAvailable ? false : 'no bare TCP handles in this Node' }, async (t) => {
  t.test('bulk both ways at once, slow readers on each side: every byte, in order', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    const up = payload(1, BULK);
    const down = payload(2, BULK);
    const [upSha, downSha] = await Promise.all([
      digest(socket, prng(3)),
      digest(stream, prng(4)),
      send(stream, up.chunks),
      send(socket, down.chunks),
    ]);
    t.equal(upSha, up.sha, 'stream to target exact');
    t.equal(downSha, down.sha, 'target to stream exact');
    t.equal(await closed, undefined, 'the relay ended cleanly');
  });

  t.test('a target that stops reading stops the stream sender (bounded), nothing lost after', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    socket.pause();
    const up = payload(5, BULK);
    const progress = send(stream, up.chunks);
    await stalled(progress);
    t.ok(progress.sent < BULK / 2, `the sender stalled after ${progress.sent} of ${BULK} bytes`);
    const sha = digest(socket);
    socket.resume();
    t.equal(await sha, up.sha, 'every byte arrived after the target resumed');
    socket.end();
    await once(stream.resume(), 'end');
    t.equal(await closed, undefined, 'the relay ended cleanly');
  });

  t.test('a stream reader that stops reading stops the target sender (bounded), nothing lost after', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    stream.pause();
    const down = payload(6, BULK);
    const progress = send(socket, down.chunks);
    await stalled(progress);
    t.ok(progress.sent < BULK / 2, `the sender stalled after ${progress.sent} of ${BULK} bytes`);
    const sha = digest(stream);
    stream.resume();
    t.equal(await sha, down.sha, 'every byte arrived after the reader resumed');
    stream.end();
    await once(socket.resume(), 'end');
    socket.end();
    t.equal(await closed, undefined, 'the relay ended cleanly');
  });

  t.test('half-close from the stream: END_STREAM reaches the target as FIN, its answer still flows', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    const answer = digestText(stream);
    stream.end('question');
    const asked = digestText(socket);
    t.equal(await asked, 'question', 'the target read the bytes, then EOF');
    socket.end('answer after the FIN');
    t.equal(await answer, 'answer after the FIN', 'the answer came back, then END_STREAM');
    t.equal(await closed, undefined, 'the relay ended cleanly');
    await closedStream(stream);
    t.equal(stream.rstCode, constants.NGHTTP2_NO_ERROR, 'no reset');
  });

  t.test('half-close from the target: FIN reaches the stream as END_STREAM, the stream still writes', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    const told = digestText(stream);
    const heard = digestText(socket);
    socket.end('greeting');
    t.equal(await told, 'greeting', 'the stream read the bytes, then END_STREAM');
    stream.end('late words');
    t.equal(await heard, 'late words', 'the target read the late words, then EOF');
    t.equal(await closed, undefined, 'the relay ended cleanly');
    await closedStream(stream);
    t.equal(stream.rstCode, constants.NGHTTP2_NO_ERROR, 'no reset');
  });

  t.test('a target that resets: the stream is reset with CONNECT_ERROR (RFC 9113 §8.5)', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    stream.write('hello');
    await once(socket, 'data');
    socket.resetAndDestroy();
    await closedStream(stream);
    t.equal(stream.rstCode, constants.NGHTTP2_CONNECT_ERROR, 'RST_STREAM CONNECT_ERROR');
    t.same(await closed, { side: 'handle', code: 'ECONNRESET' }, 'the relay names the failed side');
  });

  t.test('a stream that is reset: the target connection closes at once', async (t) => {
    const { target, stream, closed } = await rig(t);
    const socket = await target;
    socket.write('data the client will not read');
    stream.close(constants.NGHTTP2_CANCEL);
    t.same(await closed, { side: 'stream', rstCode: constants.NGHTTP2_CANCEL }, 'the relay saw the reset');
    t.ok(await gone(socket), 'the target connection was closed (FIN or reset)');
  });

  t.test('destroy(): the handle closes, the stream is released with the given code', async (t) => {
    const accepted: Socket[] = [];
    const server = createServer((s) => accepted.push(s.on('error', () => {})));
    const port = await listening(server);
    const h2 = createH2Server();
    let relay: StreamRelay | undefined;
    h2.on('stream', (stream: ServerHttp2Stream) => {
      dialHandle('127.0.0.1', port, { timeoutMs: 5_000 }, (outcome) => {
        stream.respond({ ':status': 200 });
        relay = new StreamRelay(outcome as TcpHandle, stream, {
          release: (s) => s.close(constants.NGHTTP2_CONNECT_ERROR),
          onClose: () => {},
        });
        relay.start();
      });
    });
    const h2Port = await listening(h2 as never);
    const session = h2connect(`http://127.0.0.1:${h2Port}`);
    const stream = session.request({ ':method': 'CONNECT', ':authority': 'target:1' });
    stream.on('error', () => {});
    await once(stream, 'response');
    await until(() => accepted.length === 1, 'the target to accept');
    relay!.destroy();
    await closedStream(stream);
    t.equal(stream.rstCode, constants.NGHTTP2_CONNECT_ERROR, 'the stream was reset with the release code');
    t.ok(await gone(accepted[0]!), 'the target connection was closed');
    session.destroy();
    await Promise.all([closeServer(server), closeServer(h2 as never)]);
    await until(() => liveHandles().sockets === 0, 'every socket closed');
  });
});

function digestText(input: NodeJS.ReadableStream): Promise<string> {
  const parts: Buffer[] = [];
  input.on('data', (c: Buffer) => parts.push(c));
  return once(input, 'end').then(() => Buffer.concat(parts).toString());
}

/** The stream's 'close', or at once if it has already closed. */
function closedStream(stream: ClientHttp2Stream): Promise<unknown> {
  return stream.closed || stream.destroyed ? Promise.resolve() : new Promise((resolve) => stream.once('close', resolve));
}
