import { constants, type Http2Stream } from 'node:http2';
import { COALESCE_LIMIT_BYTES } from './splice.js';
import { OWNER, closeHandle, shutdown, startRelayReading, stopReading, write, type HandleOwner, type TcpHandle } from './uv.js';

/** Why a stream relay ended early: the TCP side failed (errno name), or the stream was reset. */
export type StreamRelayFailure = { side: 'handle'; code: string } | { side: 'stream'; rstCode: number };

export interface StreamRelayOptions {
  /**
   * Lets go of the stream when the relay ends before the stream finished (the TCP side failed or
   * left, or destroy()): the agent closes it with RST_STREAM CONNECT_ERROR (RFC 9113 §8.5), the
   * proxy ends it with END_STREAM (tunnel/release-stream.ts). It must close the stream.
   */
  release: (stream: Http2Stream) => void;
  /** Runs once, when the handle is closed and the stream is closed or released. */
  onClose: (failure: StreamRelayFailure | undefined) => void;
}

/**
 * Relays bytes both ways between a bare libuv TCP handle (uv.ts) and an HTTP/2 stream: what
 * splice() does for a net.Socket and a stream, without the net.Socket. The handle side works as
 * HandleRelay does (reads into the shared read buffer, the relay its handle's owner, no closure
 * per read); the stream side is the Duplex Node gives.
 *
 * - Backpressure each way: a stream write() that returns false stops the handle's reads until
 *   'drain', and a read that is a view of the handle's own buffer (bulk) stops them until the
 *   stream's write of it has called back (nghttp2 has framed the bytes by then, so the buffer
 *   may be read into again); writes libuv had to queue pause the stream from COALESCE_LIMIT_BYTES
 *   (splice.ts) on, until they are out.
 * - Half-close each way: the handle's EOF ends the stream (END_STREAM), the stream's end shuts
 *   the handle's writing side down (FIN once the queued writes are out).
 * - The relay is done when the stream has closed cleanly (both its directions ended, no reset)
 *   and the handle's FIN is sent: then the handle is closed.
 * - A failed read, write or shutdown on the handle closes it and releases the stream
 *   (`options.release`); a stream that closes uncleanly (a reset, its session gone) closes the
 *   handle at once.
 */
export class StreamRelay implements HandleOwner {
  /** Reads so far on either side; the idle sweep compares it between sweeps. */
  reads = 0;
  private finalRead = 0;
  private finalWritten = 0;
  /** The handle's EOF came (and the stream was ended). */
  private handleEnded = false;
  /** Handle writes libuv queued that have not completed yet. */
  private writesQueued = 0;
  /** The stream is paused until the handle's queued writes are out. */
  private streamPaused = false;
  /** Chunks from the stream not written to the handle yet (see streamData). */
  private pending: Buffer[] | undefined = undefined;
  private finSent = false;
  /** Handle reads stop until the stream drains. */
  private awaitingDrain = false;
  /** Handle reads stop until the stream's write of the handle's own buffer calls back. */
  private awaitingWrite = false;
  private streamClosed = false;
  private closed = false;
  // One of each per relay, none per read.
  private readonly onStreamData = (chunk: Buffer): void => this.streamData(chunk);
  private readonly onStreamEnd = (): void => this.streamEnd();
  private readonly onStreamDrain = (): void => this.streamDrained();
  private readonly onStreamClose = (): void => this.streamClose();
  private readonly onStreamWritten = (): void => this.streamWritten();

  constructor(
    readonly handle: TcpHandle,
    readonly stream: Http2Stream,
    private readonly options: StreamRelayOptions,
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

  /**
   * Writes `first` (bytes read before the relay) to the stream, then relays both ways. `ended`:
   * the handle's EOF was read before the relay too (it is passed on at once, no read follows).
   */
  start(first?: Buffer, ended = false): void {
    const { stream } = this;
    stream.on('data', this.onStreamData);
    stream.once('end', this.onStreamEnd);
    stream.on('drain', this.onStreamDrain);
    stream.once('close', this.onStreamClose);
    // Errors come with the close that follows them (rstCode, destroyed): absorbed here.
    stream.on('error', ignore);
    if (stream.destroyed || stream.closed) return this.streamClose();
    if (first && first.length > 0 && !stream.write(first)) this.awaitingDrain = true;
    if (ended) return this.onHandleEnd(this.handle, undefined);
    if (!this.awaitingDrain) this.readHandle();
  }

  /** Closes the handle now and releases the stream (idle timeout, shutdown, the agent stopping). */
  destroy(): void {
    if (this.closed) return;
    this.close();
    this.releaseStream();
    this.options.onClose(undefined);
  }

  onHandleData(_handle: TcpHandle, chunk: Buffer, reused?: boolean): void {
    this.reads++;
    // A view of the handle's own buffer is the stream's until its write calls back.
    if (reused) {
      this.awaitingWrite = true;
      stopReading(this.handle);
      if (!this.stream.write(chunk, this.onStreamWritten)) this.awaitingDrain = true;
      return;
    }
    if (!this.stream.write(chunk)) {
      this.awaitingDrain = true;
      stopReading(this.handle);
    }
  }

  onHandleEnd(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.fail(error);
    this.handleEnded = true;
    stopReading(this.handle);
    if (!this.stream.writableEnded) this.stream.end();
  }

  onHandleWritten(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.fail(error);
    this.writesQueued--;
    if (this.closed || this.writesQueued > 0 || !this.streamPaused) return;
    this.streamPaused = false;
    this.stream.resume();
  }

  onHandleShutdown(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined && error !== 'ENOTCONN') return this.fail(error);
    this.finished();
  }

  private readHandle(): void {
    if (this.closed || this.handleEnded || this.awaitingDrain || this.awaitingWrite) return;
    if (!startRelayReading(this.handle, this)) this.fail('EBADF');
  }

  private streamWritten(): void {
    this.awaitingWrite = false;
    this.readHandle();
  }

  private streamDrained(): void {
    this.awaitingDrain = false;
    this.readHandle();
  }

  /*
   * A stream delivers one socket read of its session as many small chunks (a DATA frame, or the
   * part of one a TLS record held: 16 KiB at most each). Written one by one they would cost a
   * write syscall each; gathered until the loop's check phase they go out in one write (as
   * splice's relayCoalesced does with cork). Backpressure starts, as there, at
   * COALESCE_LIMIT_BYTES queued in libuv, not at the first queued write: pausing the stream and
   * resuming it costs, and a stream read by fits and starts holds back its window updates.
   */
  private streamData(chunk: Buffer): void {
    if (this.closed) return;
    this.reads++;
    if (this.pending) {
      this.pending.push(chunk);
      return;
    }
    this.pending = [chunk];
    setImmediate(flushPending, this);
  }

  /** Writes what the stream delivered since the last write (libuv keeps writes in order). */
  flush(): void {
    const { pending } = this;
    if (!pending || this.closed) return;
    this.pending = undefined;
    const result = write(this.handle, pending.length === 1 ? pending[0]! : pending);
    if (result === 'done') return;
    if (result !== 'queued') return this.fail(result);
    this.writesQueued++;
    if (!this.streamPaused && this.handle.writeQueueSize >= COALESCE_LIMIT_BYTES) {
      this.streamPaused = true;
      this.stream.pause();
    }
  }

  private streamEnd(): void {
    this.flush();
    // libuv sends the FIN after the writes queued before it.
    this.sendFin();
  }

  private sendFin(): void {
    if (this.closed || this.finSent) return;
    if (!shutdown(this.handle)) this.finished();
  }

  /** The handle's FIN is out. */
  private finished(): void {
    this.finSent = true;
    if (this.streamClosed) this.end(undefined);
  }

  private streamClose(): void {
    this.streamClosed = true;
    if (this.closed) return;
    const { stream } = this;
    const clean = stream.rstCode === constants.NGHTTP2_NO_ERROR && stream.readableEnded && stream.writableFinished;
    if (!clean) return this.end({ side: 'stream', rstCode: stream.rstCode ?? constants.NGHTTP2_INTERNAL_ERROR });
    // Both of the stream's directions ended: done once the handle's FIN is out.
    if (this.finSent) this.end(undefined);
  }

  private fail(code: string): void {
    if (this.closed) return;
    this.close();
    this.releaseStream();
    this.options.onClose({ side: 'handle', code });
  }

  private end(failure: StreamRelayFailure | undefined): void {
    if (this.closed) return;
    this.close();
    this.options.onClose(failure);
  }

  private releaseStream(): void {
    if (!this.streamClosed && !this.stream.destroyed) this.options.release(this.stream);
  }

  private close(): void {
    this.closed = true;
    this.finalRead = this.handle.bytesRead;
    this.finalWritten = this.handle.bytesWritten;
    closeHandle(this.handle);
    const { stream } = this;
    stream.removeListener('data', this.onStreamData);
    stream.removeListener('end', this.onStreamEnd);
    stream.removeListener('drain', this.onStreamDrain);
    stream.removeListener('close', this.onStreamClose);
  }
}

function ignore(): void {}

function flushPending(relay: StreamRelay): void {
  relay.flush();
}
