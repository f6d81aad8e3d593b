import type { Duplex } from 'node:stream';

/**
 * Joins two duplex streams: each direction is piped with backpressure (a slow reader pauses the
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
  a.pipe(b);
  b.pipe(a);
}
