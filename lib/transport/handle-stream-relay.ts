import { COALESCE_LIMIT_BYTES } from './splice.js';
import { closeHandle, OWNER, shutdown, startRelayReading, stopReading, write, type HandleOwner, type TcpHandle } from './uv.js';

/**
 * Handle writes libuv may hold queued before the stream is paused, whatever their size: a stream
 * of tiny frames to a client that does not read would otherwise queue a write request per frame
 * until COALESCE_LIMIT_BYTES (issue 37). A paused framed stream gathers what arrives meanwhile.
 */
export const MAX_QUEUED_WRITES = 64;

/** A relay that ended because its TCP handle failed: the errno name (ECONNRESET, ...). */
export interface HandleFailure {
  side: 'handle';
  code: string;
}

/**
 * The handle's half of a relay between a bare libuv TCP handle (uv.ts) and a stream: a subclass
 * (FramedRelay, for a stream of the tunnel framing) says through the abstract methods below how
 * it talks to its stream.
 *
 * What it keeps:
 * - Reads start once the stream can take bytes, and stop while it cannot (`awaitingDrain`: a
 *   write to the stream returned false; `streamDrained()` restarts them).
 * - A read into the handle's own buffer is written to the stream without a copy, and the handle
 *   is not read again until that write calls back (`writeStream`'s `written`).
 * - Writes to the handle that libuv had to queue pause the stream from COALESCE_LIMIT_BYTES
 *   (splice.ts) or MAX_QUEUED_WRITES on, until they are out.
 * - The handle's EOF ends the stream; the stream's end becomes the handle's FIN (`sendFin`), sent
 *   by libuv after the writes queued before it.
 * - Done when the stream has closed cleanly and the handle's FIN is out; a failed read, write or
 *   shutdown closes the handle and releases the stream; a stream that failed closes the handle at
 *   once (`end` with the subclass's failure).
 */
export abstract class HandleStreamRelay<Failure> implements HandleOwner {
  /** Reads so far on either side; the idle sweep compares it between sweeps. */
  reads = 0;
  private finalRead = 0;
  private finalWritten = 0;
  /** The handle's EOF came (and the stream was ended). */
  protected handleEnded = false;
  /** Handle writes libuv queued that have not completed yet. */
  private writesQueued = 0;
  /** The stream is paused until the handle's queued writes are out. */
  private streamPaused = false;
  private finSent = false;
  /** Handle reads stop until the stream drains. */
  protected awaitingDrain = false;
  /** Handle reads stop until the stream's write of the handle's own buffer calls back. */
  private awaitingWrite = false;
  private readonly onStreamWritten = (): void => this.streamWritten();
  /** The stream has closed (cleanly or not). */
  protected streamClosed = false;
  protected closed = false;

  constructor(
    readonly handle: TcpHandle,
    private readonly onClose: (failure: HandleFailure | Failure | undefined) => void,
  ) {
    handle[OWNER] = this;
  }

  /** The handle's byte counts (a client's include what was read before the relay). */
  get bytesRead(): number {
    return this.closed ? this.finalRead : this.handle.bytesRead;
  }

  get bytesWritten(): number {
    return this.closed ? this.finalWritten : this.handle.bytesWritten;
  }

  /** Closes the handle now and releases the stream (idle timeout, shutdown, the agent stopping). */
  destroy(): void {
    if (this.closed) return;
    this.close();
    this.releaseIfOpen();
    this.onClose(undefined);
  }

  /**
   * A read of the handle goes to the stream. A view of the handle's own buffer (`reused`) is the
   * stream's until its write calls back: the handle is not read again before then.
   */
  onHandleData(_handle: TcpHandle, chunk: Buffer, reused?: boolean): void {
    this.reads++;
    if (reused) {
      this.awaitingWrite = true;
      stopReading(this.handle);
      if (!this.writeStream(chunk, this.onStreamWritten)) this.awaitingDrain = true;
      return;
    }
    if (!this.writeStream(chunk)) {
      this.awaitingDrain = true;
      stopReading(this.handle);
    }
  }

  onHandleEnd(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.fail(error);
    this.handleEnded = true;
    stopReading(this.handle);
    this.endStream();
  }

  onHandleWritten(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.fail(error);
    this.writesQueued--;
    if (this.closed || this.writesQueued > 0 || !this.streamPaused) return;
    this.streamPaused = false;
    this.resumeStream();
  }

  onHandleShutdown(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined && error !== 'ENOTCONN') return this.fail(error);
    this.finSent = true;
    if (this.streamClosed) this.end(undefined);
  }

  // --- what a subclass says about its stream ---

  /**
   * Writes handle bytes to the stream; false when it wants no more until 'drain'. `written`, when
   * given, must run once the stream no longer holds `data`.
   */
  protected abstract writeStream(data: Buffer, written?: () => void): boolean;
  /** Ends the stream's writing side (the handle's EOF). */
  protected abstract endStream(): void;
  protected abstract pauseStream(): void;
  protected abstract resumeStream(): void;
  /** Lets go of a stream the relay no longer carries (the handle failed, or destroy()). */
  protected abstract releaseStream(): void;
  /** Removes the relay's listeners from the stream. */
  protected abstract detachStream(): void;
  // --- for subclasses ---

  /** Starts (or restarts) reading the handle, unless something holds the reads back. */
  protected readHandle(): void {
    if (this.closed || this.handleEnded || this.awaitingDrain || this.awaitingWrite) return;
    if (!startRelayReading(this.handle, this)) this.fail('EBADF');
  }

  private streamWritten(): void {
    this.awaitingWrite = false;
    this.readHandle();
  }

  protected streamDrained(): void {
    this.awaitingDrain = false;
    this.readHandle();
  }

  /** Writes stream bytes to the handle; a write libuv queues counts towards pausing the stream. */
  protected writeHandle(data: Buffer | Buffer[]): void {
    const result = write(this.handle, data);
    if (result === 'done') return;
    if (result !== 'queued') return this.fail(result);
    this.writesQueued++;
    if (!this.streamPaused && (this.handle.writeQueueSize >= COALESCE_LIMIT_BYTES || this.writesQueued >= MAX_QUEUED_WRITES)) {
      this.streamPaused = true;
      this.pauseStream();
    }
  }

  /** The stream's end: the handle's FIN, after the writes queued before it. */
  protected sendFin(): void {
    if (this.closed || this.finSent) return;
    if (!shutdown(this.handle)) this.onHandleShutdown(this.handle, undefined);
  }

  /** The stream closed: cleanly (done once the FIN is out) or with `failure` (done now). */
  protected streamEnded(failure: Failure | undefined): void {
    this.streamClosed = true;
    if (this.closed) return;
    if (failure !== undefined) return this.end(failure);
    if (this.finSent) this.end(undefined);
  }

  protected fail(code: string): void {
    if (this.closed) return;
    this.close();
    this.releaseIfOpen();
    this.onClose({ side: 'handle', code });
  }

  private end(failure: Failure | undefined): void {
    if (this.closed) return;
    this.close();
    this.onClose(failure);
  }

  private releaseIfOpen(): void {
    if (!this.streamClosed) this.releaseStream();
  }

  private close(): void {
    this.closed = true;
    this.finalRead = this.handle.bytesRead;
    this.finalWritten = this.handle.bytesWritten;
    closeHandle(this.handle);
    this.detachStream();
  }
}
