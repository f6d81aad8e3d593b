// One framed stream on its own, its session reduced to the calls it makes: what a paused stream
// keeps of the bytes that arrive while nobody reads it.
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
