import { constants, type Http2Stream } from 'node:http2';
import { type HandleFailure, HandleStreamRelay } from './handle-stream-relay.js';
import type { TcpHandle } from './uv.js';

/** A stream relay that ended because the stream was reset (or its session went). */
export interface StreamFailure {
  side: 'stream';
  rstCode: number;
}

/** Why a stream relay ended early: the TCP side failed (errno name), or the stream was reset. */
export type StreamRelayFailure = HandleFailure | StreamFailure;

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
export class StreamRelay extends HandleStreamRelay<StreamFailure> {
  /** Chunks from the stream not written to the handle yet (see streamData). */
  private pending: Buffer[] | undefined = undefined;
  // One of each per relay, none per read.
  private readonly onStreamData = (chunk: Buffer): void => this.streamData(chunk);
  private readonly onStreamEnd = (): void => this.streamEnd();
  private readonly onStreamDrain = (): void => this.streamDrained();
  private readonly onStreamClose = (): void => this.streamClose();

  constructor(
    handle: TcpHandle,
    readonly stream: Http2Stream,
    private readonly options: StreamRelayOptions,
  ) {
    super(handle, options.onClose);
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

  protected writeStream(data: Buffer, written?: () => void): boolean {
    return this.stream.write(data, written);
  }

  protected endStream(): void {
    if (!this.stream.writableEnded) this.stream.end();
  }

  protected pauseStream(): void {
    this.stream.pause();
  }

  protected resumeStream(): void {
    this.stream.resume();
  }

  protected releaseStream(): void {
    if (!this.stream.destroyed) this.options.release(this.stream);
  }

  protected detachStream(): void {
    const { stream } = this;
    stream.removeListener('data', this.onStreamData);
    stream.removeListener('end', this.onStreamEnd);
    stream.removeListener('drain', this.onStreamDrain);
    stream.removeListener('close', this.onStreamClose);
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
    this.writeHandle(pending.length === 1 ? pending[0]! : pending);
  }

  private streamEnd(): void {
    this.flush();
    // libuv sends the FIN after the writes queued before it.
    this.sendFin();
  }

  private streamClose(): void {
    const { stream } = this;
    const clean = stream.rstCode === constants.NGHTTP2_NO_ERROR && stream.readableEnded && stream.writableFinished;
    // Both of the stream's directions ended: done once the handle's FIN is out.
    this.streamEnded(clean ? undefined : { side: 'stream', rstCode: stream.rstCode ?? constants.NGHTTP2_INTERNAL_ERROR });
  }
}

function ignore(): void {}

function flushPending(relay: StreamRelay): void {
  relay.flush();
}
