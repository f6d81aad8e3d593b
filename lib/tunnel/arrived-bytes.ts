import type { Duplex } from 'node:stream';

/**
 * Hands `then` the bytes a stream a peer just opened brought along with its HEADERS: the DATA
 * the opener wrote right after them (OpenStreamOptions.firstBytes), or undefined when none came.
 *
 * Waits one turn of the event loop at most, never for bytes still on their way. Node emits a new
 * stream from inside the session's read, before it has parsed the frames after the HEADERS in
 * that same read; by `setImmediate` it has, and the opener writes both in one go, so they arrive
 * in one read. Waiting for DATA that may never come (a client that waits for its server to speak
 * first sends none) would cost the connection a deadline instead of a loop turn.
 */
export function takeArrivedBytes(stream: Duplex, then: (bytes: Buffer | undefined) => void): void {
  if (stream.readableLength > 0) return then(readHeld(stream));
  setImmediate(() => then(readHeld(stream)));
}

function readHeld(stream: Duplex): Buffer | undefined {
  if (stream.readableLength === 0 || stream.destroyed) return undefined;
  return (stream.read() as Buffer | null) ?? undefined;
}
