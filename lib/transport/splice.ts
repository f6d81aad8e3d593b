import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ReadBuffer, ReadSink } from './read-buffer.js';

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
  passEnd(src, dst);
  // A source paused for detection (bytes unshifted) starts flowing only when told to.
  src.resume();
}

/**
 * `src`'s FIN becomes `dst`'s. A source may have ended before the relay was attached: its first
 * bytes and FIN read by the caller together (a tunnel's first bytes sent with the CONNECT), so
 * 'end' will not come again and is passed on now.
 */
function passEnd(src: Duplex, dst: Duplex): void {
  if (src.readableEnded) dst.end();
  else src.once('end', () => dst.end());
}

/** Bytes a coalescing relay lets gather in `dst` before it pauses `src` . */
export const COALESCE_LIMIT_BYTES = 256 * 1024;

/**
 * Writes a coalescing relay lets queue in `dst` before it pauses `src`, whatever their size: bulk
 * reaches COALESCE_LIMIT_BYTES first (256 writes of 1 KiB), tiny chunks reach this.
 */
const COALESCE_LIMIT_WRITES = 256;

/**
 * `relay` for the two sides of a tunnel stream. An HTTP/2 stream delivers a read as
 * many small chunks (a DATA frame, or the part of one a TLS record held: a few KiB each), so
 * `dst` is corked from the first chunk until the loop's check phase and the chunks of one read
 * leave in one writev (on a TLS socket one SSL_write: full records, one syscall) rather than one
 * each. And an HTTP/2 stream's high-water mark is 16 KiB, under one 64 KiB socket read: `relay`
 * paused and resumed the source for every chunk (two epoll_ctl calls each), so backpressure here
 * starts at COALESCE_LIMIT_BYTES queued in `dst` instead (well inside the 1 MiB stream window).
 */
function relayCoalesced(src: Duplex, dst: Duplex): void {
  let corked = false;
  const flush = (): void => {
    corked = false;
    dst.uncork();
  };
  /** Writes queued in `dst` since it was last empty: bounded in count, not only in bytes. */
  let queued = 0;
  const written = (): void => {
    queued = 0;
    src.resume();
  };
  src.on('data', (chunk: Buffer) => {
    if (!corked) {
      corked = true;
      dst.cork();
      setImmediate(flush);
    }
    if (dst.writableLength === 0) queued = 0;
    if (++queued >= COALESCE_LIMIT_WRITES) {
      // Many small chunks (tiny frames from the other side, issue 37) would each be an entry
      // in `dst`'s buffer until COALESCE_LIMIT_BYTES: paused at a count instead, until this
      // write (and so every one before it) is out. A paused framed stream gathers meanwhile.
      dst.write(chunk, written);
      src.pause();
      return;
    }
    // A false from write() (its high-water mark) always comes with a 'drain' once `dst` empties,
    // so pausing only then cannot stall.
    if (!dst.write(chunk) && dst.writableLength >= COALESCE_LIMIT_BYTES) src.pause();
  });
  dst.on('drain', () => src.resume());
  passEnd(src, dst);
  src.resume();
}

/**
 * Copies a socket read through a `ReadBuffer` into `dst`; in bulk, without copying the bytes in
 * JavaScript: `dst.write` gets a view of the connection's read buffer. Node does not copy a write that the kernel did not
 * take at once; it keeps the view until the write completes (checked on Node 20: a partially
 * written buffer changed afterwards arrives changed). So after a write that is still queued
 * (`writableLength > 0`), reading stops until that write's callback, and only then may the read
 * buffer be filled again. That is also the backpressure: a slow `dst` stops `src`'s reads.
 * In place only for a plain `net.Socket` destination, whose writes go straight to the kernel, or
 * one the caller vouches for (`dstReleasesAtCallback`: an HTTP/2 stream); any other stream might
 * keep the view after calling back, so it gets a copy.
 */
function relayBuffered(reader: ReadBuffer, src: Socket, dst: Duplex, dstReleasesAtCallback = false): void {
  const zeroCopy = dstReleasesAtCallback || Object.getPrototypeOf(dst) === Socket.prototype;
  let issued = 0;
  let completed = 0;
  let resumeAt = 0;
  // Writable calls write callbacks once each, in write order, also on error and destroy.
  const written = (): void => {
    if (++completed === resumeAt) {
      resumeAt = 0;
      if (!src.destroyed) src.resume();
    }
  };
  const sink: ReadSink = (chunk, reused) => {
    const inPlace = reused && zeroCopy;
    const ok = dst.write(reused && !zeroCopy ? Buffer.from(chunk) : chunk, written);
    issued++;
    if (inPlace ? dst.writableLength === 0 : ok) return true;
    resumeAt = issued;
    return false;
  };
  passEnd(src, dst);
  if (reader.attach(sink)) src.resume();
}

/**
 * Both directions finished with no error. An HTTP/2 stream also needs no reset: Node ends a reset
 * stream's readable side (and its writable one may have finished before), so a reset after one
 * side's FIN looks finished but is not, and the other side must go too, not stay half-open.
 */
function closedCleanly(side: Duplex, error: Error | undefined): boolean {
  const { rstCode } = side as { rstCode?: number };
  return side.readableEnded && side.writableFinished && !error && !rstCode;
}

export interface SpliceOptions {
  /**
   * How to let `b` go when `a` closes early, instead of destroying it (a tunnel stream is ended
   * with a FIN rather than reset: see releaseTunnelStream, tunnel/tunnel-stream.ts). It must still
   * close `b`.
   */
  releaseB?: (b: Duplex) => void;
  /** Relay a -> b with `relayCoalesced` (a tunnel stream's sides). */
  coalesceA?: boolean;
  /** Relay b -> a with `relayCoalesced`. */
  coalesceB?: boolean;
  /**
   * `a` is done with a written buffer once that write's callback ran, so `bReader`'s buffer may
   * be written to it in place (as to a plain net.Socket). True of an HTTP/2 stream: nghttp2 takes
   * the bytes into frames that the session writes to its socket, and the write completes after
   * that write (TLS has encrypted them by then).
   */
  aReleasesAtCallback?: boolean;
}

/**
 * Joins two duplex streams: each direction is relayed with backpressure (a slow reader pauses the
 * other side's reads) and ends on its own, so a client's FIN reaches the upstream while the
 * upstream's answer keeps flowing back (half-close). Both sockets must allow half-open.
 *
 * An error on either side, or one side closing before both of its directions finished, destroys
 * the other; `onClose` runs once when both are closed, with the first error if there was one.
 * `bReader`: `b` is a socket reading through it (see `relayBuffered`).
 */
export function splice(
  a: Duplex,
  b: Duplex,
  onClose: (error: Error | undefined) => void,
  bReader?: ReadBuffer,
  options: SpliceOptions = {},
): void {
  let firstError: Error | undefined;
  let closed = 0;
  const onError = (err: Error): void => {
    firstError ??= err;
  };
  const closeHandler = (self: Duplex, other: Duplex) => (): void => {
    // A side that closed without finishing both directions (reset, destroy, timeout) takes the
    // other with it; a clean close means the other side already got our FIN and sent its own.
    if (!other.destroyed && !closedCleanly(self, firstError)) {
      if (self === a && options.releaseB) options.releaseB(b);
      else other.destroy();
    }
    if (++closed === 2) onClose(firstError);
  };
  a.on('error', onError);
  b.on('error', onError);
  a.once('close', closeHandler(a, b));
  b.once('close', closeHandler(b, a));
  if (options.coalesceA) relayCoalesced(a, b);
  else relay(a, b);
  if (bReader && b instanceof Socket) relayBuffered(bReader, b, a, options.aReleasesAtCallback);
  else if (options.coalesceB) relayCoalesced(b, a);
  else relay(b, a);
}
