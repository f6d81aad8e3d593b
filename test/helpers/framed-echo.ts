// The answering end the framing's suites share: a stream answered 200 and echoed back, with its
// own backpressure (paused while the echo has no credit), its FIN after the other side's.
import type { FramedStream } from '../../lib/tunnel-framing/framed-stream.js';

export function echoFramed(stream: FramedStream): void {
  stream.respond({ status: 200, code: '', reason: '' });
  stream.on('data', (chunk: Buffer) => {
    if (!stream.write(Buffer.from(chunk))) {
      stream.pause();
      stream.once('drain', () => stream.resume());
    }
  });
  stream.once('end', () => stream.end());
  stream.resume();
}
