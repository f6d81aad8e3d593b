// The relay between a bare libuv TCP handle (lib/transport/uv.ts) and a stream of a framed tunnel
// session: a client connection at the proxy, or a target connection at the agent, carried with no
// net.Socket and no Duplex on either side.
import { COALESCE_LIMIT_BYTES } from '../transport/splice.js';
import { closeHandle, OWNER, shutdown, startRelayReading, stopReading, write, type HandleOwner, type TcpHandle } from '../transport/uv.js';
import type { FramedStream } from './framed-stream.js';
import { WireError } from './frames.js';

/** Why a framed relay ended early: the TCP side failed (errno name), or the stream was reset. */
export type FramedRelayFailure = { side: 'handle'; code: string } | { side: 'stream'; wireCode: number; reason: string };

export interface FramedRelayOptions {
  /**
   * Lets go of the stream when the relay ends before the stream finished (the TCP side failed or
   * left, or destroy()). The proxy ends it with a FIN (`releaseFramedStream`), the agent resets it
   * with CONNECT_ERROR. It must end or reset the stream.
   */
  release: (stream: FramedStream) => void;
  /** Runs once, when the handle is closed and the stream is closed or released. */
  onClose: (failure: FramedRelayFailure | undefined) => void;
}

/**
 * Relays bytes both ways between a handle and a framed stream, as StreamRelay
 * (lib/transport/stream-relay.ts) does for an HTTP/2 stream:
 *
 * - Backpressure each way: a stream write past its credit stops the handle's reads until
 *   'drain'; writes libuv had to queue pause the stream from COALESCE_LIMIT_BYTES on, until they
 *   are out (the stream then returns no credit, so the other side stops too).
 * - Half-close each way: the handle's EOF is the stream's FIN, the stream's FIN shuts the handle's
 *   writing side down once the queued writes are out.
 * - Done when the stream has closed cleanly (both FINs) and the handle's FIN is sent.
 * - A failed read, write or shutdown closes the handle and releases the stream; a stream reset
 *   (or its session gone) closes the handle at once.
 *
 * Bytes read into the handle's shared buffer are copied before they go to the stream: the session
 * gathers its output until the loop's next turn, and the buffer is read into again before that.
 */
export class FramedRelay implements HandleOwner {
  /** Reads so far on either side; the idle sweep compares it between sweeps. */
  reads = 0;
  private finalRead = 0;
  private finalWritten = 0;
  private handleEnded = false;
  private writesQueued = 0;
  private streamPaused = false;
  private finSent = false;
  private awaitingDrain = false;
  private streamClosed = false;
  private closed = false;
  private readonly onStreamData = (chunk: Buffer): void => this.streamData(chunk);
  private readonly onStreamEnd = (): void => this.streamEnd();
  private readonly onStreamDrain = (): void => this.streamDrained();
  private readonly onStreamClose = (): void => this.streamClose();

  constructor(
    readonly handle: TcpHandle,
    readonly stream: FramedStream,
    private readonly options: FramedRelayOptions,
  ) {
    handle[OWNER] = this;
  }

  get bytesRead(): number {
    return this.closed ? this.finalRead : this.handle.bytesRead;
  }

  get bytesWritten(): number {
    return this.closed ? this.finalWritten : this.handle.bytesWritten;
  }

  /**
   * Writes `first` (bytes read before the relay) to the stream, then relays both ways. `ended`:
   * the handle's EOF was read before the relay too.
   */
  start(first?: Buffer, ended = false): void {
    const { stream } = this;
    stream.on('data', this.onStreamData);
    stream.once('end', this.onStreamEnd);
    stream.on('drain', this.onStreamDrain);
    stream.once('close', this.onStreamClose);
    if (stream.closed) return this.streamClose();
    stream.resume();
    if (first && first.length > 0 && !stream.write(first)) this.awaitingDrain = true;
    if (ended) return this.onHandleEnd(this.handle, undefined);
    this.readHandle();
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
    if (!this.stream.write(reused ? Buffer.from(chunk) : chunk)) {
      this.awaitingDrain = true;
      stopReading(this.handle);
    }
  }

  onHandleEnd(_handle: TcpHandle, error: string | undefined): void {
    if (error !== undefined) return this.fail(error);
    this.handleEnded = true;
    stopReading(this.handle);
    this.stream.end();
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
    this.finSent = true;
    if (this.streamClosed) this.end(undefined);
  }

  private readHandle(): void {
    if (this.closed || this.handleEnded || this.awaitingDrain) return;
    if (!startRelayReading(this.handle, this)) this.fail('EBADF');
  }

  private streamDrained(): void {
    this.awaitingDrain = false;
    this.readHandle();
  }

  private streamData(chunk: Buffer): void {
    if (this.closed) return;
    this.reads++;
    const result = write(this.handle, chunk);
    if (result === 'done') return;
    if (result !== 'queued') return this.fail(result);
    this.writesQueued++;
    if (!this.streamPaused && this.handle.writeQueueSize >= COALESCE_LIMIT_BYTES) {
      this.streamPaused = true;
      this.stream.pause();
    }
  }

  /** The stream's FIN: libuv sends the handle's FIN after the writes queued before it. */
  private streamEnd(): void {
    if (this.closed || this.finSent) return;
    if (!shutdown(this.handle)) this.onHandleShutdown(this.handle, undefined);
  }

  private streamClose(): void {
    this.streamClosed = true;
    if (this.closed) return;
    const { stream } = this;
    if (stream.closeCode !== undefined) return this.end({ side: 'stream', wireCode: stream.closeCode, reason: stream.closeReason });
    if (this.finSent) this.end(undefined);
  }

  private fail(code: string): void {
    if (this.closed) return;
    this.close();
    this.releaseStream();
    this.options.onClose({ side: 'handle', code });
  }

  private end(failure: FramedRelayFailure | undefined): void {
    if (this.closed) return;
    this.close();
    this.options.onClose(failure);
  }

  private releaseStream(): void {
    if (!this.streamClosed && !this.stream.closed) this.options.release(this.stream);
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

/** How long a released stream may take to finish cleanly before it is reset after all. */
export const RELEASE_GRACE_MS = 5_000;

/**
 * Lets go of a stream whose client has gone with a FIN, not a reset: a client that leaves early is
 * ordinary, and resets are what the other side's rapid-reset budget counts (framed-session.ts).
 * What the other side still sends is read and dropped, so the connection's credit comes back;
 * a target that ignores the FIN has its stream cancelled after `graceMs`.
 */
export function releaseFramedStream(stream: FramedStream, graceMs = RELEASE_GRACE_MS): void {
  if (stream.closed) return;
  stream.removeAllListeners('data');
  stream.on('data', ignore);
  stream.resume();
  stream.end();
  const timer = setTimeout(() => stream.reset(WireError.CANCEL, 'released: the client left'), graceMs);
  timer.unref();
  stream.once('close', () => clearTimeout(timer));
}

/** The agent's release: the TCP connection behind the stream failed (RFC 9113 §8.5's CONNECT_ERROR). */
export function resetConnectError(stream: FramedStream): void {
  stream.reset(WireError.CONNECT_ERROR, 'the target connection failed');
}

function ignore(): void {}
