// A framed stream as a Node Duplex (lib/tunnel-framing/framed-duplex.ts), over a real framed
// session on loopback TCP: bytes exact both ways through stream.pipeline, backpressure from an
// unread Duplex back to the other side's writer, half-close, and resets both ways with the codes.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ErrorCodes } from '../../lib/errors.js';
import { FramedDuplex } from '../../lib/tunnel-framing/framed-duplex.js';
import { FramedSession } from '../../lib/tunnel-framing/framed-session.js';
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';
import { StreamKind, WireError } from '../../lib/tunnel-framing/frames.js';
import { echoFramed } from '../helpers/framed-echo.js';
import { closeServer, listening } from '../helpers/net.js';
import { payload, send, stalled } from '../helpers/relay-checks.js';

async function duplexTo(t: Test, onOpen: (stream: FramedStream) => void): Promise<FramedDuplex> {
  const server = createServer();
  const port = await listening(server);
  const dialled = connect(port, '127.0.0.1');
  const [accepted] = (await once(server, 'connection')) as [Socket];
  const agent = new FramedSession(dialled, { side: 'dialer', onOpen, streamWindow: 64 * 1024, connectionWindow: 256 * 1024 });
  const proxy = new FramedSession(accepted, { side: 'listener', streamWindow: 64 * 1024, connectionWindow: 256 * 1024 });
  t.teardown(async () => {
    agent.destroy();
    proxy.destroy();
    await closeServer(server);
  });
  return new FramedDuplex(proxy.open({ kind: StreamKind.CONNECT, target: 'x:1', client: '' }));
}

t.test('4 MiB through pipeline both ways, in order, and both sides end', async (t) => {
  const duplex = await duplexTo(t, echoFramed);
  const up = payload(21, 4 << 20);
  const hash = createHash('sha256');
  await Promise.all([
    pipeline(Readable.from(up.chunks), duplex),
    pipeline(
      duplex,
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          done();
        },
      }),
    ),
  ]);
  t.equal(hash.digest('hex'), up.sha, 'every byte echoed, in order');
  t.equal(duplex.stream.closeCode, undefined, 'the stream closed by both FINs');
});

t.test('an unread Duplex holds the other side back, and gives every byte once read', async (t) => {
  let agent: FramedStream | undefined;
  const duplex = await duplexTo(t, (stream) => {
    agent = stream;
    stream.respond({ status: 200, code: '', reason: '' });
    stream.resume();
  });
  await once(duplex.stream, 'response');
  const down = payload(22, 4 << 20);
  const progress = send(agent!, down.chunks);
  await stalled(progress);
  t.ok(progress.sent < 1 << 20, `the writer stalled after ${progress.sent} bytes`);
  const hash = createHash('sha256');
  duplex.on('data', (chunk: Buffer) => hash.update(chunk));
  await once(duplex, 'end');
  t.equal(hash.digest('hex'), down.sha, 'every byte, once read');
  const closed = once(duplex.stream, 'close');
  duplex.end();
  await closed;
  t.equal(duplex.stream.closeCode, undefined, 'closed by both FINs');
});

t.test("the other side's reset destroys the Duplex with the code and reason", async (t) => {
  const duplex = await duplexTo(t, (stream) => {
    stream.respond({ status: 200, code: '', reason: '' });
    stream.reset(WireError.CONNECT_ERROR, 'the target connection failed');
  });
  const [err] = (await once(duplex, 'error')) as [Error & { code: string }];
  t.equal(err.code, ErrorCodes.AGENT_STREAM_FAILED);
  t.match(err.message, /CONNECT_ERROR: the target connection failed/);
  t.ok(duplex.destroyed);
});

t.test('a Duplex destroyed first resets the stream: CANCEL, or CONNECT_ERROR with an error', async (t) => {
  for (const [withError, code] of [
    [false, WireError.CANCEL],
    [true, WireError.CONNECT_ERROR],
  ] as const) {
    let agent: FramedStream | undefined;
    const duplex = await duplexTo(t, (stream) => {
      agent = stream;
      stream.respond({ status: 200, code: '', reason: '' });
      stream.resume();
    });
    duplex.on('error', () => {});
    await once(duplex.stream, 'response');
    const closed = once(agent!, 'close');
    duplex.destroy(withError ? new Error('client socket failed') : undefined);
    await closed;
    t.equal(agent!.closeCode, code, withError ? 'with an error' : 'without one');
  }
});
