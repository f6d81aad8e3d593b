// A framed stream as a Node Duplex, for the paths that relay streams rather than bare handles: a
// client whose TLS ended at the proxy (a database route), and the holder's hop while peering
// still speaks HTTP/2. The bare-handle paths use FramedRelay and spliceFramed, with no Duplex.
import { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import type { FramedStream } from './framed-stream.js';
import { WireError, wireErrorName } from './frames.js';
import { HOLD_AS_IS_BYTES, HeldPieces } from './held-pieces.js';

/** What the Duplex's readable side holds before it pauses the stream: a quarter of its window. */
const DUPLEX_READ_AHEAD_BYTES = 256 * 1024;

/**
 * Small pieces that arrive while the readable side holds bytes are gathered up to this before they
 * are pushed: the read-ahead then holds at most about DUPLEX_READ_AHEAD_BYTES / 16 KiB objects,
 * not one per tiny frame (issue 37: one-byte DATA frames, a Buffer and a buffered chunk each).
 */
const GATHER_BYTES = 16 * 1024;

/**
 * Wraps `stream`: its bytes are the Duplex's readable side (the stream is paused while the
 * readable buffer is full, so it returns no credit), writes go to the stream and call back once
 * it has credit for them, `end()` is the stream's FIN and its FIN ends the readable side. A stream
 * that is reset destroys the Duplex with GATE_ERR_AGENT_STREAM_FAILED naming the code and reason;
 * a Duplex destroyed first resets the stream (CANCEL, or CONNECT_ERROR when given an error), so
 * neither outlives the other.
 */
export class FramedDuplex extends Duplex {
  /** A write waiting for the stream's 'drain'. */
  private waiting: ((err?: Error | null) => void) | undefined = undefined;
  /** Small pieces waiting to be pushed together. */
  private readonly gathered = new HeldPieces();

  constructor(readonly stream: FramedStream) {
    // The stream's own window bounds what it holds; a Readable's 16 KiB default would pause it
    // at nearly every frame, and a paused stream copies what arrives meanwhile.
    super({ allowHalfOpen: true, readableHighWaterMark: DUPLEX_READ_AHEAD_BYTES });
    stream.on('data', (chunk: Buffer) => this.streamData(chunk));
    stream.once('end', () => {
      this.pushGathered();
      this.push(null);
    });
    stream.on('drain', () => this.drained());
    stream.once('close', () => this.streamClosed());
  }

  override _read(): void {
    // The reader took everything: what was gathered goes now, whatever its size.
    if (this.readableLength === 0 && this.gathered.bytes > 0 && !this.pushGathered()) return;
    this.stream.resume();
  }

  /**
   * As a Readable's, and once the reader has taken everything buffered, what was gathered is
   * pushed: the Readable may not ask (`_read`) again before a push answers its last request.
   */
  override read(size?: number): unknown {
    const chunk: unknown = super.read(size);
    if (this.gathered.bytes > 0 && this.readableLength === 0) this.pushGathered();
    return chunk;
  }

  private streamData(chunk: Buffer): void {
    // The reader keeps up (nothing buffered), or bulk: pushed as it is, after what was gathered.
    if (chunk.length >= HOLD_AS_IS_BYTES || (this.readableLength === 0 && this.gathered.bytes === 0)) {
      this.pushGathered();
      if (!this.push(chunk)) this.stream.pause();
      return;
    }
    this.gathered.add(chunk);
    if (this.gathered.bytes >= GATHER_BYTES) this.pushGathered();
  }

  /** Pushes what was gathered; false (and the stream paused) when the readable side is full. */
  private pushGathered(): boolean {
    const gathered = this.gathered.takeAll();
    if (gathered === undefined || this.push(gathered)) return true;
    this.stream.pause();
    return false;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.stream.closed) return callback(this.resetError());
    if (this.stream.write(chunk)) return callback();
    this.waiting = callback;
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.stream.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (!this.stream.closed) this.stream.reset(err ? WireError.CONNECT_ERROR : WireError.CANCEL, err?.message ?? 'closed');
    this.drained(err ?? undefined);
    callback(err);
  }

  private drained(err?: Error): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.(err);
  }

  private streamClosed(): void {
    const { stream } = this;
    if (stream.closeCode === undefined || this.destroyed) return this.drained();
    const error = this.resetError();
    this.drained(error);
    this.destroy(error);
  }

  private resetError(): GateError {
    const { stream } = this;
    const code = stream.closeCode === undefined ? 'closed' : wireErrorName(stream.closeCode);
    return new GateError(
      ErrorCodes.AGENT_STREAM_FAILED,
      `tunnel stream ${stream.id} ${code}${stream.closeReason ? `: ${stream.closeReason}` : ''}`,
    );
  }
}
