// Cuts a byte stream into frames (frames.ts). Pure: it is given chunks and calls back with frames,
// and knows nothing of sockets or streams.
import { FRAME_HEADER_BYTES, FrameError, MAX_FRAME_PAYLOAD, WireError } from './frames.js';

/** One frame; `payload` may be a view of the chunk it arrived in (copy it to keep it past the call). */
export type FrameSink = (type: number, flags: number, streamId: number, payload: Buffer) => void;

/**
 * Reads frames from chunks as they come. A frame inside one chunk is handed on as a view of it,
 * with no copy; only a frame split across chunks is gathered, once, when its last byte has come.
 * At most one frame (MAX_FRAME_PAYLOAD + 9 bytes) is ever held. A header announcing a longer
 * payload throws a FrameError (FRAME_SIZE_ERROR) before any of it is awaited.
 */
export class FrameReader {
  /** Bytes of a frame not whole yet, in the order they came. */
  private parts: Buffer[] = [];
  private partsBytes = 0;

  constructor(
    private readonly sink: FrameSink,
    private readonly maxPayload = MAX_FRAME_PAYLOAD,
  ) {}

  /** Bytes held for a frame not whole yet. */
  get held(): number {
    return this.partsBytes;
  }

  push(chunk: Buffer): void {
    let data = chunk;
    if (this.partsBytes > 0) {
      const need = this.needed(chunk);
      if (need === undefined || this.partsBytes + chunk.length < need) {
        this.parts.push(chunk);
        this.partsBytes += chunk.length;
        return;
      }
      // The held frame is whole with this chunk: its bytes alone are gathered, once; the rest of
      // the chunk is read in place.
      const take = need - this.partsBytes;
      this.parts.push(chunk.subarray(0, take));
      const frame = Buffer.concat(this.parts, need);
      this.parts = [];
      this.partsBytes = 0;
      this.emit(frame, 0, need);
      data = chunk.subarray(take);
    }
    let at = 0;
    while (data.length - at >= FRAME_HEADER_BYTES) {
      const end = at + FRAME_HEADER_BYTES + this.payloadLength(data, at);
      if (end > data.length) break;
      this.emit(data, at, end);
      at = end;
    }
    if (at < data.length) {
      this.parts.push(at === 0 ? data : data.subarray(at));
      this.partsBytes = data.length - at;
    }
  }

  private emit(data: Buffer, at: number, end: number): void {
    const streamId = data.readUInt32BE(at + 5) & 0x7fffffff;
    this.sink(data[at + 3]!, data[at + 4]!, streamId, data.subarray(at + FRAME_HEADER_BYTES, end));
  }

  /** The payload length a header at `at` announces, refused past the bound. */
  private payloadLength(data: Buffer, at: number): number {
    const length = (data[at]! << 16) | (data[at + 1]! << 8) | data[at + 2]!;
    if (length > this.maxPayload)
      throw new FrameError(WireError.FRAME_SIZE_ERROR, `a frame of ${length} bytes (at most ${this.maxPayload})`);
    return length;
  }

  /** The whole length of the held frame, once its header has come (with `next`, if need be). */
  private needed(next: Buffer): number | undefined {
    if (this.partsBytes + next.length < FRAME_HEADER_BYTES) return undefined;
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    let filled = 0;
    for (const part of [...this.parts, next]) {
      filled += part.copy(header, filled, 0, Math.min(part.length, FRAME_HEADER_BYTES - filled));
      if (filled === FRAME_HEADER_BYTES) break;
    }
    return FRAME_HEADER_BYTES + this.payloadLength(header, 0);
  }
}
