/**
 * The `-ping` ALPN variants (`gate-postgres-ping`, ...) frame the stream as uint32 big-endian
 * length + payload; a zero length is a keep-alive ping the reader drops. The proxy sends pings so
 * idle database sessions survive load balancers that cut silent connections.
 *
 * Pure and streaming: payload bytes are handed on as they arrive, so a frame announcing 4 GiB
 * never makes us buffer more than the chunk in hand.
 */
export class PingFrameDecoder {
  private header = Buffer.alloc(4);
  private headerFill = 0;
  private remaining = 0;

  /** Returns the payload slices carried by `chunk` (pings produce none). */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - offset);
        out.push(chunk.subarray(offset, offset + take));
        this.remaining -= take;
        offset += take;
        continue;
      }
      const take = Math.min(4 - this.headerFill, chunk.length - offset);
      chunk.copy(this.header, this.headerFill, offset, offset + take);
      this.headerFill += take;
      offset += take;
      if (this.headerFill === 4) {
        this.remaining = this.header.readUInt32BE(0);
        this.headerFill = 0;
      }
    }
    return out;
  }

  /** True between frames: a stream that ends now ended cleanly. */
  get atBoundary(): boolean {
    return this.remaining === 0 && this.headerFill === 0;
  }
}

/** A keep-alive ping: a zero length prefix, with no payload. */
export const PING_FRAME = Buffer.alloc(4);

/** The 4-byte length prefix (uint32 big-endian) of a payload of `length` bytes. */
export function lengthPrefix(length: number): Buffer {
  const header = Buffer.allocUnsafe(4);
  header.writeUInt32BE(length, 0);
  return header;
}
