// What a reader holds unread: a stream paused with bytes arriving, a Duplex's read-ahead. Pure:
// buffers in, buffers out. It bounds the objects held, not only the bytes (issue 37: one-byte DATA
// frames held one Buffer each cost about 140 bytes of heap per byte of credit).

/**
 * A piece at least this long that is most of the read it came in is held as it is (bulk, while
 * the reader is behind): copying it would cost more than it saves. Anything smaller is copied
 * into a tail buffer it shares with its neighbours.
 */
export const HOLD_AS_IS_BYTES = 8 * 1024;

/** The largest tail; tails grow from TAIL_MIN_BYTES as more is held, so a few bytes cost little. */
const TAIL_MAX_BYTES = 16 * 1024;
const TAIL_MIN_BYTES = 512;

/** Pieces up to this long are copied byte by byte (see `add`). */
const SMALL_COPY_BYTES = 16;

/**
 * Bytes held in order, as few objects as they allow: small pieces are gathered into tails of up
 * to 16 KiB, large ones (HOLD_AS_IS_BYTES, most of their read) kept as they are. Whatever the
 * pieces' sizes, `n` bytes are held in at most about n / 8 KiB objects, plus the tails' growth.
 *
 * A piece handed to `add` is a view of a read the caller may reuse: a small one is always copied,
 * so it never pins its read either.
 */
export class HeldPieces {
  /** Bytes held. */
  bytes = 0;
  private pieces: Buffer[] = [];
  /** The tail small pieces are copied into, and how much of it is used. */
  private tail: Buffer | undefined = undefined;
  private tailUsed = 0;

  /** Objects held: a measure for tests and limits (each piece and the tail, if any). */
  get count(): number {
    return this.pieces.length + (this.tailUsed > 0 ? 1 : 0);
  }

  add(piece: Buffer): void {
    const length = piece.length;
    if (length === 0) return;
    this.bytes += length;
    if (length >= HOLD_AS_IS_BYTES && length * 2 >= piece.buffer.byteLength) {
      this.seal();
      this.pieces.push(piece);
      return;
    }
    let at = 0;
    while (at < length) {
      let tail = this.tail;
      if (tail === undefined || this.tailUsed === tail.length) {
        this.seal();
        // Sized to what is held, so a paused stream with a few bytes does not hold 16 KiB.
        const size = Math.min(TAIL_MAX_BYTES, Math.max(TAIL_MIN_BYTES, this.bytes - at));
        tail = Buffer.allocUnsafeSlow(size);
        this.tail = tail;
      }
      const n = Math.min(length - at, tail.length - this.tailUsed);
      // A few bytes (one-byte DATA frames) by hand: Buffer#copy's native call costs more than they do.
      if (n <= SMALL_COPY_BYTES) for (let i = 0, to = this.tailUsed; i < n; i++) tail[to + i] = piece[at + i]!;
      else piece.copy(tail, this.tailUsed, at, at + n);
      this.tailUsed += n;
      at += n;
    }
  }

  /** The oldest piece, or undefined when nothing is held. */
  shift(): Buffer | undefined {
    if (this.pieces.length === 0) this.seal();
    const piece = this.pieces.shift();
    if (piece) this.bytes -= piece.length;
    return piece;
  }

  /** Everything held, as one buffer (undefined when nothing is). */
  takeAll(): Buffer | undefined {
    this.seal();
    const { pieces, bytes } = this;
    if (bytes === 0) return undefined;
    this.clear();
    return pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, bytes);
  }

  clear(): void {
    this.pieces = [];
    this.bytes = 0;
    this.tail = undefined;
    this.tailUsed = 0;
  }

  /** The tail's used part becomes a piece of its own; later small pieces start a new tail. */
  private seal(): void {
    if (this.tail === undefined || this.tailUsed === 0) return;
    this.pieces.push(this.tail.subarray(0, this.tailUsed));
    this.tail = undefined;
    this.tailUsed = 0;
  }
}
