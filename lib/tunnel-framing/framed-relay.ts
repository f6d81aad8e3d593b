// The relay between a bare libuv TCP handle (lib/transport/uv.ts) and a stream of a framed tunnel
// session: a client connection at the proxy, or a target connection at the agent, carried with no
// net.Socket and no Duplex on either side.
import { type HandleFailure, HandleStreamRelay } from '../transport/handle-stream-relay.js';
import type { TcpHandle } from '../transport/uv.js';
import type { FramedStream } from './framed-stream.js';
import { type AnswerPayload, WireError } from './frames.js';

/** A framed relay that ended because the stream was reset (or refused, or its session went). */
export interface FramedStreamFailure {
  side: 'stream';
  wireCode: number;
  reason: string;
}

/** Why a framed relay ended early: the TCP side failed (errno name), or the stream was reset. */
export type FramedRelayFailure = HandleFailure | FramedStreamFailure;

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
 * Relays bytes both ways between a handle and a framed stream: the handle's half is
 * HandleStreamRelay's (backpressure, half-close, failures). On the stream's side:
 *
 * - A write past the stream's credit stops the handle's reads until 'drain'; a paused stream
 *   returns no credit, so the other side stops too.
 * - The stream's bytes are written to the handle as they come: a framed stream delivers one
 *   payload per frame, and the session's frames of one socket read come together already.
 * - A read into the handle's own buffer goes to the stream as it is, not copied: the session
 *   holds it until its socket write completes (it gathers a turn's frames first), so the handle
 *   is not read again until the stream's `written` callback.
 */
export class FramedRelay extends HandleStreamRelay<FramedStreamFailure> {
  private readonly onStreamData = (chunk: Buffer): void => this.streamData(chunk);
  private readonly onStreamEnd = (): void => this.sendFin();
  private readonly onStreamDrain = (): void => this.streamDrained();
  private readonly onStreamClose = (): void => this.streamClose();

  constructor(
    handle: TcpHandle,
    readonly stream: FramedStream,
    private readonly options: FramedRelayOptions,
  ) {
    super(handle, options.onClose);
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

  protected writeStream(data: Buffer, written?: () => void): boolean {
    return this.stream.write(data, written);
  }

  protected endStream(): void {
    this.stream.end();
  }

  protected pauseStream(): void {
    this.stream.pause();
  }

  protected resumeStream(): void {
    this.stream.resume();
  }

  protected releaseStream(): void {
    if (!this.stream.closed) this.options.release(this.stream);
  }

  protected detachStream(): void {
    const { stream } = this;
    stream.removeListener('data', this.onStreamData);
    stream.removeListener('end', this.onStreamEnd);
    stream.removeListener('drain', this.onStreamDrain);
    stream.removeListener('close', this.onStreamClose);
  }

  private streamData(chunk: Buffer): void {
    if (this.closed) return;
    this.reads++;
    this.writeHandle(chunk);
  }

  private streamClose(): void {
    const { stream } = this;
    this.streamEnded(
      stream.closeCode === undefined ? undefined : { side: 'stream', wireCode: stream.closeCode, reason: stream.closeReason },
    );
  }
}

/** How long a released stream may take to finish cleanly, once answered, before it is reset after all. */
export const RELEASE_GRACE_MS = 5_000;

/**
 * Lets go of a stream whose client has gone with a FIN, not a reset: a client that leaves early is
 * ordinary, and resets are what the other side's rapid-reset budget counts (framed-session.ts).
 * What the other side still sends is read and dropped, so the connection's credit comes back;
 * a target that ignores the FIN has its stream cancelled `graceMs` after the other side's answer.
 *
 * Never before that answer: a stream reset before it is answered is what the other side's budget
 * counts (a rapid reset), so a stream let go before its answer keeps its slot (the proxy counts
 * it against its cap, settings.ts) and waits for the answer, which the other side's dial timeout
 * bounds; the grace starts then. However many clients leave early, and whatever their targets do
 * with the FIN, the proxy spends none of the agent's budget (issue 37).
 */
export function releaseFramedStream(stream: FramedStream, graceMs = RELEASE_GRACE_MS): void {
  if (stream.closed) return;
  stream.removeAllListeners('data');
  stream.on('data', ignore);
  stream.resume();
  stream.end();
  const arm = (): void => {
    const timer = setTimeout(() => stream.reset(WireError.CANCEL, 'released: the client left'), graceMs);
    timer.unref();
    stream.once('close', () => clearTimeout(timer));
  };
  // A refusal closes the stream as it arrives: only an opened stream has a grace to run.
  if (stream.opened && stream.answer === undefined) stream.once('response', (answer: AnswerPayload) => answer.status === 200 && arm());
  else arm();
}

/** The agent's release: the TCP connection behind the stream failed (RFC 9113 §8.5's CONNECT_ERROR). */
export function resetConnectError(stream: FramedStream): void {
  stream.reset(WireError.CONNECT_ERROR, 'the target connection failed');
}

function ignore(): void {}
