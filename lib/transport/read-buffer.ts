import type { OnReadOpts } from 'node:net';

/**
 * Every connection reads into one buffer shared by all of them, and the bytes are copied out
 * before anyone else can read (JavaScript runs one read callback at a time): an idle connection
 * holds no read buffer at all, and a small read costs one small copy, as Node's own per-read
 * Buffer would. A read that fills the shared buffer marks a bulk transfer: the connection moves
 * to a large buffer of its own and its reads are relayed without any copy (see splice's
 * relayBuffered), with fewer syscalls and fewer trips into JavaScript per byte. A read that uses
 * little of the large buffer moves it back, so a connection that goes quiet does not keep it.
 */
const SHARED_BYTES = 64 * 1024;
const OWN_BYTES = 128 * 1024;
const SMALL_READ_BYTES = OWN_BYTES >>> 4;

let shared: Buffer | undefined;
/** The one buffer every connection's small reads land in (see above). */
export function sharedReadBuffer(): Buffer {
  shared ??= Buffer.allocUnsafe(SHARED_BYTES);
  return shared;
}

export function isSharedReadBuffer(buffer: Uint8Array): boolean {
  return buffer === shared;
}

/**
 * Where a connection's next read goes after `nread` bytes landed in `current`, when that changes
 * (the policy above): a full shared buffer moves it to its own, a small read moves it back.
 */
export function nextReadBuffer(current: Buffer, nread: number): Buffer | undefined {
  if (current === shared) return nread === current.length ? Buffer.allocUnsafe(OWN_BYTES) : undefined;
  return nread <= SMALL_READ_BYTES ? sharedReadBuffer() : undefined;
}

/**
 * Receives the bytes of one read. `reused`: the chunk is a view of this connection's own read
 * buffer, which the next read overwrites; the sink must be done with it when it returns true, or
 * return false: reading stops (the socket is paused) until the sink's owner resumes the socket,
 * which it must not do before it is done with the chunk. Otherwise the chunk is the sink's.
 */
export type ReadSink = (chunk: Buffer, reused: boolean) => boolean;

/**
 * Gets a socket's reads delivered from buffers managed here (Node's `onread` mode of
 * `net.connect`) instead of one fresh Buffer per read pushed through the Readable machinery.
 * Bytes that arrive before a sink is attached are held (reading stops) and handed to the sink
 * when it attaches.
 */
export class ReadBuffer {
  private buffer: Buffer = sharedReadBuffer();
  private sink: ReadSink | undefined;
  private held: Buffer | undefined;
  /** Pass as `onread` to `net.connect`. */
  readonly onread: OnReadOpts;

  constructor() {
    this.onread = {
      buffer: () => this.buffer,
      callback: (nread: number, buf: Uint8Array) => this.deliver(nread, buf as Buffer),
    };
  }

  /**
   * Sets the consumer of the bytes read. Held bytes go to it at once; reading was stopped for
   * them, and the caller resumes the socket if this returns true.
   */
  attach(sink: ReadSink): boolean {
    this.sink = sink;
    const held = this.held;
    if (held === undefined) return true;
    this.held = undefined;
    return sink(held, false);
  }

  private deliver(nread: number, buf: Buffer): boolean {
    const own = buf !== shared;
    // The buffer for the next read; this one may still be in use by the sink (then it paused).
    this.buffer = nextReadBuffer(buf, nread) ?? this.buffer;
    const view = buf.subarray(0, nread);
    if (!this.sink) {
      this.held = Buffer.from(view);
      return false;
    }
    if (!own) return this.sink(Buffer.from(view), false);
    return this.sink(view, this.buffer === buf);
  }
}
