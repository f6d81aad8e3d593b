// The relay between a bare TCP handle and a framed stream (lib/tunnel-framing/framed-relay.ts), on
// real loopback sockets and a real framed session: the agent's side of a tunnel on the framing. The
// opener (the proxy's side) opens a stream; the answerer dials a TCP "target" as a bare handle
// (dialHandle) and relays the stream to it. Checked: bytes exact both ways under slow readers, backpressure
// bounded each way, half-close each way, a reset on each side and the code the other side sees,
// release with a FIN, no handle left behind.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { dialHandle } from '../../lib/transport/handle-dial.js';
import { GateError } from '../../lib/errors.js';
import { handlesAvailable } from '../../lib/transport/uv.js';
import { FramedRelay, type FramedRelayFailure, releaseFramedStream, resetConnectError } from '../../lib/tunnel-framing/framed-relay.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { closeServer, listening, liveHandles, until } from '../helpers/net.js';
import { prng } from '../helpers/prng.js';
import { digest, gone, payload, send, type Source, stalled } from '../helpers/relay-checks.js';

const MiB = 1 << 20;
/** Far more than every buffer on the way (socket buffers, the stream's 256 KiB window) holds. */
const BULK = 24 * MiB;
/** A smaller window than the default 1 MiB, so that backpressure shows within BULK. */
const WINDOWS = { streamWindow: 256 * 1024, connectionWindow: 1 * MiB };

interface Rig {
  /** The target's side of the relayed TCP connection, once accepted. */
  target: Promise<Socket>;
  /** The opener's end of the stream, answered 200. */
  stream: FramedStream;
  /** The relay's end report. */
  closed: Promise<FramedRelayFailure | undefined>;
  relay: () => FramedRelay;
}

async function rig(t: Test, release: (stream: FramedStream) => void = resetConnectError): Promise<Rig> {
  const accepted: Socket[] = [];
  let onAccept: (s: Socket) => void = () => {};
  const targetServer = createServer({ allowHalfOpen: true }, (s) => {
    accepted.push(s);
    s.on('error', () => {});
    onAccept(s);
  });
  const targetPort = await listening(targetServer);
  let onClosed: (f: FramedRelayFailure | undefined) => void = () => {};
  const closed = new Promise<FramedRelayFailure | undefined>((resolve) => (onClosed = resolve));
  let relay: FramedRelay | undefined;
  const tunnelServer = createServer();
  const tunnelPort = await listening(tunnelServer);
  const agentSide = connect(tunnelPort, '127.0.0.1');
  const [proxySide] = (await once(tunnelServer, 'connection')) as [Socket];
  const agent = new FramedSession(agentSide, {
    side: 'dialer',
    ...WINDOWS,
    onOpen: (stream) =>
      dialHandle('127.0.0.1', targetPort, { timeoutMs: 5_000 }, (outcome) => {
        if (outcome instanceof GateError) throw outcome;
        stream.respond({ status: 200, code: '', reason: '' });
        relay = new FramedRelay(outcome, stream, { release, onClose: onClosed });
        relay.start();
      }),
  });
  const proxy = new FramedSession(proxySide, { side: 'listener', ...WINDOWS });
  const target = new Promise<Socket>((resolve) => (onAccept = resolve));
  const stream = proxy.open({ kind: StreamKind.CONNECT, target: 'target:1', client: '' });
  const [answer] = (await once(stream, 'response')) as [{ status: number }];
  t.equal(answer.status, 200, 'the stream was answered');
  t.teardown(async () => {
    for (const s of accepted) s.destroy();
    proxy.destroy();
    agent.destroy();
    await Promise.all([closeServer(targetServer), closeServer(tunnelServer)]);
    await until(() => liveHandles().sockets === 0, 'every socket closed');
  });
  return { target, stream, closed, relay: () => relay! };
}

function text(input: Source): Promise<string> {
  const parts: Buffer[] = [];
  input.on('data', (c: Buffer) => parts.push(Buffer.from(c)));
  const ended = new Promise<void>((resolve) => input.once('end', resolve));
  input.resume();
  return ended.then(() => Buffer.concat(parts).toString());
}

function streamClosed(stream: FramedStream): Promise<unknown> {
  return stream.closed ? Promise.resolve() : once(stream, 'close');
}

t.test(
  'the relay between a bare handle and a framed stream',
  { skip: handlesAvailable ? false : 'no bare TCP handles in this Node' },
  async (t) => {
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
      await streamClosed(stream);
      t.equal(stream.closeCode, undefined, 'the stream closed clean');
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
      t.equal(await sha, up.sha, 'every byte arrived after the target resumed');
      socket.end();
      await text(stream);
      t.equal(await closed, undefined, 'the relay ended cleanly');
    });

    t.test('a stream reader that stops reading stops the target sender (bounded), nothing lost after', async (t) => {
      const { target, stream, closed } = await rig(t);
      const socket = await target;
      const down = payload(6, BULK);
      const progress = send(socket, down.chunks);
      await stalled(progress);
      t.ok(progress.sent < BULK / 2, `the sender stalled after ${progress.sent} of ${BULK} bytes`);
      const sha = digest(stream);
      t.equal(await sha, down.sha, 'every byte arrived after the reader resumed');
      stream.end();
      await once(socket.resume(), 'end');
      t.equal(await closed, undefined, 'the relay ended cleanly');
    });

    t.test('half-close from the stream: its FIN reaches the target, the answer still flows', async (t) => {
      const { target, stream, closed } = await rig(t);
      const socket = await target;
      const answer = text(stream);
      stream.write(Buffer.from('question'));
      stream.end();
      t.equal(await text(socket), 'question', 'the target read the bytes, then EOF');
      socket.end('answer after the FIN');
      t.equal(await answer, 'answer after the FIN', 'the answer came back, then the FIN');
      t.equal(await closed, undefined, 'the relay ended cleanly');
      await streamClosed(stream);
      t.equal(stream.closeCode, undefined, 'no reset');
    });

    t.test('half-close from the target: its FIN reaches the stream, the stream still writes', async (t) => {
      const { target, stream, closed } = await rig(t);
      const socket = await target;
      const told = text(stream);
      const heard = text(socket);
      socket.end('greeting');
      t.equal(await told, 'greeting', 'the stream read the bytes, then the FIN');
      stream.write(Buffer.from('late words'));
      stream.end();
      t.equal(await heard, 'late words', 'the target read the late words, then EOF');
      t.equal(await closed, undefined, 'the relay ended cleanly');
    });

    t.test('a target that resets: the stream is reset with CONNECT_ERROR', async (t) => {
      const { target, stream, closed } = await rig(t);
      const socket = await target;
      stream.write(Buffer.from('hello'));
      await once(socket, 'data');
      socket.resetAndDestroy();
      await streamClosed(stream);
      t.equal(stream.closeCode, WireError.CONNECT_ERROR, 'reset CONNECT_ERROR');
      t.ok(stream.closedByPeer, 'by the agent');
      t.same(await closed, { side: 'handle', code: 'ECONNRESET' }, 'the relay names the failed side');
    });

    t.test('one-byte frames to a target whose buffers are full: a bounded count of queued writes', async (t) => {
      const { target, stream, relay } = await rig(t);
      const socket = await target;
      socket.pause();
      // Bulk until the kernel's buffers are full and libuv holds a write: then every byte the
      // stream delivers is a queued write of its own (issue 37), until the relay pauses it.
      const block = Buffer.alloc(16 * 1024, 1);
      for (let i = 0; i < 2000 && relay().handle.writeQueueSize === 0; i++) {
        stream.write(block);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      const before = relay().handle.writeQueueSize;
      t.ok(before > 0 && before < 256 * 1024, `libuv holds ${before} bytes: the byte bound is not reached`);
      const one = Buffer.from('x');
      for (let i = 0; i < 10_000; i++) stream.write(one);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const grew = relay().handle.writeQueueSize - before;
      t.ok(grew <= 64, `${grew} one-byte writes queued after it (10,000 frames sent), not one per frame`);
    });

    t.test('a stream that is reset: the target connection closes at once', async (t) => {
      const { target, stream, closed } = await rig(t);
      const socket = await target;
      socket.write('data the client will not read');
      stream.reset(WireError.CANCEL, 'gone');
      t.same(await closed, { side: 'stream', wireCode: WireError.CANCEL, reason: 'gone' }, 'the relay saw the reset, with its reason');
      t.ok(await gone(socket), 'the target connection was closed (FIN or reset)');
    });

    t.test('destroy() at the proxy: released with a FIN, not a reset; the target sees EOF', async (t) => {
      // The proxy's side of a relay on the framing is the same class; here the agent's relay is the
      // one destroyed, with the proxy's release, to check releaseFramedStream end to end.
      const { target, stream, relay } = await rig(t, releaseFramedStream);
      const socket = await target;
      const told = text(stream);
      relay().destroy();
      t.ok(await gone(socket), 'the target connection was closed');
      t.equal(await told, '', 'the other side got a FIN');
      stream.end();
      await streamClosed(stream);
      t.equal(stream.closeCode, undefined, 'no reset: closed by both FINs');
    });
  },
);
