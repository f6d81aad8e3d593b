import type { OnReadOpts } from 'node:net';

/**
 * Read sizes. A connection starts with a small buffer (a slice of Buffer's shared pool, so an idle
 * connection holds almost nothing) and moves up when a read fills it, so a bulk transfer soon
 * reads in large chunks: fewer syscalls and fewer trips into JavaScript per byte. After a read
 * that used little of a large buffer it drops back, so a connection that goes quiet after a
 * burst does not keep its large buffer.
 */
const SMALL_BYTES = 2048;
const LARGE_BYTES = 16 * 1024;
const BULK_BYTES = 128 * 1024;

function nextSize(size: number, nread: number): number {
  if (nread === size) return size === SMALL_BYTES ? LARGE_BYTES : BULK_BYTES;
  if (size > SMALL_BYTES && nread <= size >>> 4) return SMALL_BYTES;
  return size;
}

/**
 * Gets a socket's reads delivered straight from a buffer the connection owns (Node's `onread`
 * mode for `net.connect`), instead of one fresh Buffer per read pushed through the Readable
 * machinery. The `sink` receives a view of the bytes just read; it must be done with that view
 * when it returns true, or return false: reading stops (the socket is paused) until the sink's
 * owner resumes the socket, and the next read goes to a new buffer only if this one grew or
 * shrank, so the owner must not resume before it is done with the view.
 *
 * Bytes that arrive before a sink is attached are held (reading stops) and handed to the sink
 * when it attaches.
 */
export class ReadBuffer {
  private buffer = Buffer.allocUnsafe(SMALL_BYTES);
  private sink: ((chunk: Buffer) => boolean) | undefined;
  private held = 0;
  /** Pass as `onread` to `net.connect`. */
  readonly onread: OnReadOpts;

  constructor() {
    this.onread = {
      buffer: () => this.buffer,
      callback: (nread: number, buf: Uint8Array) => this.deliver(nread, buf as Buffer),
    };
  }

  /**
   * Sets the consumer of the bytes read. Held bytes go to it at once; then reading is stopped,
   * and the caller resumes the socket if this returns true (the sink is done with them).
   */
  attach(sink: (chunk: Buffer) => boolean): boolean {
    this.sink = sink;
    if (this.held === 0) return true;
    const chunk = this.buffer.subarray(0, this.held);
    this.held = 0;
    return sink(chunk);
  }

  private deliver(nread: number, buf: Buffer): boolean {
    if (!this.sink) {
      this.held = nread; // still in this.buffer, which stays the read buffer while reading is stopped
      return false;
    }
    const size = nextSize(buf.length, nread);
    // A new buffer for the next read: the sink may still be using this one (paused until done).
    if (size !== buf.length) this.buffer = Buffer.allocUnsafe(size);
    return this.sink(buf.subarray(0, nread));
  }
}
