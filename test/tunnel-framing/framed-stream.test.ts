// One framed stream on its own, its session reduced to the calls it makes: what a paused stream
// keeps of the bytes that arrive while nobody reads it, and when a writer may reuse its buffer.
import t from 'tap';
import { FramedStream, type StreamSession } from '../../lib/tunnel-framing/framed-stream.js';

/** The session side of a stream, counting the credit the stream hands back. */
function session(): StreamSession & { consumedBytes: number } {
  return {
    sendCredit: 1 << 20,
    consumedBytes: 0,
    sendData() {},
    sendWindow() {},
    sendReset() {},
    sendAnswer() {},
    consumed(bytes: number) {
      this.consumedBytes += bytes;
    },
    waitForCredit() {},
    forget() {},
  };
}

t.test('a paused stream copies a small piece of a large read, and holds a read that is mostly its own as it is', async (t) => {
  const s = session();
  const stream = new FramedStream(s, 2, 1 << 20, false);
  const read = Buffer.alloc(64 * 1024, 1); // one socket read
  const small = read.subarray(100, 110); // 10 bytes of it: held alone, it would pin all 64 KiB
  const bulk = Buffer.alloc(16 * 1024, 2); // a read that is all payload
  t.ok(stream.isPaused, 'a stream starts paused');
  t.ok(stream.receiveData(small, false));
  t.ok(stream.receiveData(bulk.subarray(0, 15 * 1024), false));
  const got: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => got.push(chunk));
  stream.resume();
  await new Promise<void>((resolve) => queueMicrotask(resolve));
  t.equal(got.length, 2, 'both delivered on resume, in order');
  t.not(got[0]!.buffer, read.buffer, 'the small piece was copied out of its read');
  t.ok(got[0]!.equals(small));
  t.equal(got[1]!.buffer, bulk.buffer, 'the bulk piece was held without a copy');
  t.equal(s.consumedBytes, 10 + 15 * 1024, 'all of it counted as read');
});

/** A session that records each DATA it is given, with whether it carried a `written` callback. */
function recordingSession(credit: number): StreamSession & { sent: Array<{ bytes: number; written: (() => void) | undefined }> } {
  return {
    ...session(),
    sendCredit: credit,
    sent: [],
    sendData(_stream: FramedStream, payload: Buffer | undefined, _end: boolean, written?: () => void) {
      this.sent.push({ bytes: payload?.length ?? 0, written });
    },
  };
}

t.test('a write held for credit keeps its `written` callback until its last byte is sent', async (t) => {
  const s = recordingSession(1 << 20);
  const stream = new FramedStream(s, 1, 1000, true); // a 1000-byte window: 2500 bytes need credit twice
  let calls = 0;
  const written = (): void => {
    calls++;
  };
  t.notOk(stream.write(Buffer.alloc(2500), written), 'past the credit: wait for drain');
  t.same(
    s.sent.map((d) => [d.bytes, d.written !== undefined]),
    [[1000, false]],
    'the first piece goes without the callback',
  );
  t.ok(stream.receiveWindow(1000));
  t.ok(stream.receiveWindow(1000));
  t.same(
    s.sent.map((d) => [d.bytes, d.written !== undefined]),
    [
      [1000, false],
      [1000, false],
      [500, true],
    ],
    'the piece with the last byte carries it',
  );
  t.equal(s.sent[2]!.written, written);
  t.equal(calls, 0, 'the stream calls nothing itself: the session does, once the write is out');
});

t.test('a write dropped with its stream still calls back, so its writer may reuse the buffer', async (t) => {
  const s = recordingSession(1 << 20);
  const stream = new FramedStream(s, 2, 1 << 20, false); // not answered yet: writes wait
  let calls = 0;
  t.notOk(stream.write(Buffer.alloc(10), () => calls++));
  t.notOk(stream.write(Buffer.alloc(10)), 'a second write, without a callback');
  stream.reset(8, 'gone');
  await new Promise<void>((resolve) => queueMicrotask(resolve));
  t.equal(calls, 1, 'called once, after the reset');
  t.equal(s.sent.length, 0, 'nothing was sent');
  stream.write(Buffer.alloc(10), () => calls++);
  await new Promise<void>((resolve) => queueMicrotask(resolve));
  t.equal(calls, 2, 'a write to a closed stream calls back too');
});
