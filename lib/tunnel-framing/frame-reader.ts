// Cuts a byte stream into frames (frames.ts). Pure: it is given chunks and calls back with frames,
// and knows nothing of sockets or streams.
import { FLAG_END, FRAME_HEADER_BYTES, FrameError, FrameType, MAX_FRAME_PAYLOAD, WireError } from './frames.js';

/**
 * One frame, or one piece of a DATA frame; `payload` may be a view of the chunk it arrived in
 * (copy it to keep it past the call).
 */
export type FrameSink = (type: number, flags: number, streamId: number, payload: Buffer) => void;

const EMPTY = Buffer.alloc(0);

/**
 * Reads frames from chunks as they come, with no copy of a DATA payload:
 *
 * - **DATA** is handed on in pieces as its bytes arrive, each a view of the chunk it came in: a
 *   64 KiB frame spread over several TLS records is never gathered. Every piece has the frame's
 *   flags but END, which only the last piece carries. A sink sees a frame's pieces in order, with
 *   nothing between them (frames are not interleaved).
 * - **Other frames** are handed on whole: a view of the chunk when it holds them, else gathered
 *   once, when the last byte has come.
 *
 * At most one header and one control frame (MAX_FRAME_PAYLOAD + 9 bytes) are ever held. A header
 * announcing a longer payload throws a FrameError (FRAME_SIZE_ERROR) before any of it is awaited.
 */
export class FrameReader {
  /** A header split across chunks, while it is not whole. */
  private header: Buffer | undefined = undefined;
  private headerBytes = 0;
  /** The frame whose payload is being read: its header, and how much of its payload is to come. */
  private type = 0;
  private flags = 0;
  private streamId = 0;
  private remaining = -1;
  /** A control frame's payload so far, gathered until whole. */
  private parts: Buffer[] = [];
  private partsBytes = 0;
  /**
   * Frames (a DATA piece counts as one) `push` may still hand on: once it is spent, `push` stops
   * at the next frame's start and returns where. The caller sets it (framed-session.ts bounds the
   * work of one turn of the event loop with it); left alone, it never runs out.
   */
  budget = Number.POSITIVE_INFINITY;

  constructor(
    private readonly sink: FrameSink,
    private readonly maxPayload = MAX_FRAME_PAYLOAD,
  ) {}

  /** Bytes held for a frame not whole yet (a split header, or a control frame's payload so far). */
  get held(): number {
    return this.headerBytes + this.partsBytes;
  }

  /**
   * Reads `chunk`; returns how much of it was read: all of it, unless the budget ran out, and
   * then the offset of the next frame's first byte (the caller hands the rest on later).
   */
  push(chunk: Buffer): number {
    let at = 0;
    while (at < chunk.length) {
      if (this.remaining >= 0) {
        at = this.payload(chunk, at);
        continue;
      }
      if (this.budget <= 0 && this.headerBytes === 0) return at;
      if (this.headerBytes === 0 && chunk.length - at >= FRAME_HEADER_BYTES) {
        // The common case: a whole header, and often the whole frame, in this chunk. A whole
        // frame is handed on at once, DATA too (its one piece, with its own flags): tiny frames
        // come by the thousand per read, and the per-frame state of `begin`/`payload` is skipped.
        const length = this.payloadLength(chunk, at);
        const end = at + FRAME_HEADER_BYTES + length;
        if (end <= chunk.length) {
          this.budget--;
          this.sink(chunk[at + 3]!, chunk[at + 4]!, streamIdAt(chunk, at), chunk.subarray(at + FRAME_HEADER_BYTES, end));
          at = end;
          continue;
        }
        this.begin(chunk, at, length);
        at += FRAME_HEADER_BYTES;
        continue;
      }
      at = this.splitHeader(chunk, at);
    }
    return at;
  }

  /** Takes a header's bytes from `chunk` at `at` until it is whole; returns where reading goes on. */
  private splitHeader(chunk: Buffer, at: number): number {
    this.header ??= Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    const take = Math.min(FRAME_HEADER_BYTES - this.headerBytes, chunk.length - at);
    chunk.copy(this.header, this.headerBytes, at, at + take);
    this.headerBytes += take;
    if (this.headerBytes === FRAME_HEADER_BYTES) {
      this.headerBytes = 0;
      this.begin(this.header, 0, this.payloadLength(this.header, 0));
    }
    return at + take;
  }

  /** A frame's header is read: its payload comes next (at once, for an empty one). */
  private begin(header: Buffer, at: number, length: number): void {
    this.type = header[at + 3]!;
    this.flags = header[at + 4]!;
    this.streamId = streamIdAt(header, at);
    this.remaining = length;
    if (length === 0) this.finish(EMPTY);
  }

  /** Payload bytes from `chunk` at `at`; returns where reading goes on. */
  private payload(chunk: Buffer, at: number): number {
    const take = Math.min(this.remaining, chunk.length - at);
    const piece = chunk.subarray(at, at + take);
    this.remaining -= take;
    if (this.type === FrameType.DATA) {
      if (this.remaining === 0) this.finish(piece);
      else if (take > 0) {
        this.budget--;
        this.sink(FrameType.DATA, this.flags & ~FLAG_END, this.streamId, piece);
      }
      return at + take;
    }
    if (this.remaining > 0) {
      this.parts.push(piece);
      this.partsBytes += take;
      return at + take;
    }
    const whole = this.partsBytes === 0 ? piece : Buffer.concat([...this.parts, piece], this.partsBytes + take);
    this.parts = [];
    this.partsBytes = 0;
    this.finish(whole);
    return at + take;
  }

  /** The frame's last bytes (all of them, but for DATA): handed on with the frame's own flags. */
  private finish(payload: Buffer): void {
    this.remaining = -1;
    this.budget--;
    this.sink(this.type, this.flags, this.streamId, payload);
  }

  /** The payload length a header at `at` announces, refused past the bound. */
  private payloadLength(data: Buffer, at: number): number {
    const length = (data[at]! << 16) | (data[at + 1]! << 8) | data[at + 2]!;
    if (length > this.maxPayload)
      throw new FrameError(WireError.FRAME_SIZE_ERROR, `a frame of ${length} bytes (at most ${this.maxPayload})`);
    return length;
  }
}

/** The stream id of a header at `at` (31 bits; the reserved bit dropped), read by hand: no bounds check per frame. */
function streamIdAt(data: Buffer, at: number): number {
  return ((data[at + 5]! & 0x7f) << 24) | (data[at + 6]! << 16) | (data[at + 7]! << 8) | data[at + 8]!;
}
