import type { Duplex } from 'node:stream';

/**
 * Copies `src` into `dst` with backpressure: a `write` that returns false pauses `src` until
 * `dst` drains; `src`'s end becomes `dst`'s FIN. Leaner than `pipe()`: two listeners per
 * direction instead of pipe's seven, and no unpipe bookkeeping (measured in BENCHMARKS.md).
 */
function relay(src: Duplex, dst: Duplex): void {
  src.on('data', (chunk: Buffer) => {
    if (!dst.write(chunk)) src.pause();
  });
  dst.on('drain', () => src.resume());
  src.once('end', () => dst.end());
  // A source paused for detection (bytes unshifted) starts flowing only when told to.
  src.resume();
}

/**
 * Joins two duplex streams: each direction is relayed with backpressure (a slow reader pauses the
 * other side's reads) and ends on its own, so a client's FIN reaches the upstream while the
 * upstream's answer keeps flowing back (half-close). Both sockets must allow half-open.
 *
 * An error on either side, or one side closing before both of its directions finished, destroys
 * the other; `onClose` runs once when both are closed, with the first error if there was one.
 */
export function splice(a: Duplex, b: Duplex, onClose: (error: Error | undefined) => void): void {
  let firstError: Error | undefined;
  let closed = 0;
  const onError = (err: Error): void => {
    firstError ??= err;
  };
  const closeHandler = (self: Duplex, other: Duplex) => (): void => {
    // A side that closed without finishing both directions (reset, destroy, timeout) takes the
    // other with it; a clean close means the other side already got our FIN and sent its own.
    if (!other.destroyed && !(self.readableEnded && self.writableFinished && !firstError)) other.destroy();
    if (++closed === 2) onClose(firstError);
  };
  a.on('error', onError);
  b.on('error', onError);
  a.once('close', closeHandler(a, b));
  b.once('close', closeHandler(b, a));
  relay(a, b);
  relay(b, a);
}
