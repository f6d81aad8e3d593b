// A framed session's input: its connection read into frames a slice at a time, and not read at
// all while the other side leaves the answers it asked for unread. framed-session.ts takes the
// frames; this decides when the socket is read.
import type { Duplex } from 'node:stream';
import { FrameReader, type FrameSink } from './frame-reader.js';
import { FrameError, floodError } from './frames.js';
import { PAUSE_OWED_ANSWERS } from './session-output.js';

/**
 * Frames read (a DATA frame's piece counts as one) between two yields to the event loop, at most.
 * One socket read may bring several TLS records, each 16 KiB of frames: of one-byte DATA frames,
 * some 6,500 in one macrotask, and nothing else on the proxy runs meanwhile (issue 37's dribble).
 * Past the bound the session stops reading, keeps the rest, and goes on in a later turn
 * (setImmediate), as nghttp2 leaves a read's rest to its next call. The budget is not refilled
 * per turn, only once spent: bulk (64 KiB frames) spends it a frame at a time, so it yields once
 * in megabytes and costs nothing per read.
 */
export const FRAMES_PER_SLICE = 1024;

/**
 * Reading paused that long because the other side reads none of its answers: it is cut
 * (ENHANCE_YOUR_CALM), rather than held until a heartbeat or an admission deadline notices.
 */
export const STALLED_ANSWERS_MS = 5_000;

/**
 * After a GOAWAY that ended the session, what the other side still sends is read and dropped (a
 * socket closed with unread bytes sends a TCP RST, which can discard the GOAWAY before it is
 * read), up to this much: a flood does not get a second of decryption at line rate.
 */
const DISCARD_LIMIT_BYTES = 1 << 20;

/** What the input needs of its session. */
export interface InputSession {
  /** True once the session is over: what comes is dropped. */
  isClosed(): boolean;
  /** Control answers the session owes and has not written. */
  owedAnswers(): number;
  /** Bytes read, before they are cut into frames (admission counts them); may throw a FrameError. */
  spendBytes(bytes: number): void;
  /** The other side broke the framing (or a limit): the session ends with a GOAWAY. */
  fail(error: FrameError): void;
  /** The other side's FIN, in order after every frame it sent. */
  peerEnded(): void;
  /** The socket closed, in order after every frame read. */
  socketClosed(): void;
}

/** Reads `socket` into `sink`, a slice at a time (FRAMES_PER_SLICE). */
export class SessionInput {
  private readonly reader: FrameReader;
  /** Reading stopped: the other side does not read its answers (PAUSE_OWED_ANSWERS). */
  private readPaused = false;
  /**
   * Set while reading yields (FRAMES_PER_SLICE spent): what was read and not yet through the
   * reader, in order (the rest of a read, and whatever the socket still emits meanwhile).
   */
  private backlog: Buffer[] | undefined = undefined;
  /**
   * The other side's FIN, or the socket's close, came while a backlog waited: each is taken once
   * the backlog is read (a socket that is not half-open closes at the FIN, with the backlog unread).
   */
  private endAfterBacklog = false;
  private closeAfterBacklog = false;
  private stallTimer: NodeJS.Timeout | undefined = undefined;
  /** Bytes read and dropped after the session ended (DISCARD_LIMIT_BYTES). */
  private discarded = 0;

  constructor(
    private readonly socket: Duplex,
    private readonly session: InputSession,
    sink: FrameSink,
  ) {
    this.reader = new FrameReader(sink);
    this.reader.budget = FRAMES_PER_SLICE;
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => {
      if (this.backlog) this.endAfterBacklog = true;
      else session.peerEnded();
    });
    socket.on('close', () => {
      if (this.backlog && !session.isClosed()) this.closeAfterBacklog = true;
      else session.socketClosed();
    });
  }

  /** True while reading waits for the other side to read its answers. */
  get paused(): boolean {
    return this.readPaused;
  }

  /** A write completed: once the answers owed are down to half the pause bound, reading goes on. */
  answersWritten(): void {
    if (this.readPaused && this.session.owedAnswers() <= PAUSE_OWED_ANSWERS / 2 && !this.session.isClosed()) {
      this.readPaused = false;
      clearTimeout(this.stallTimer);
      if (!this.backlog) this.socket.resume();
    }
  }

  /** The session is over: no stall to watch for. */
  sessionEnded(): void {
    clearTimeout(this.stallTimer);
  }

  private read(chunk: Buffer): void {
    if (this.session.isClosed()) {
      this.discarded += chunk.length;
      if (this.discarded > DISCARD_LIMIT_BYTES) this.socket.destroy();
      return;
    }
    try {
      this.session.spendBytes(chunk.length);
      if (this.backlog) {
        // Reading yields: the socket emitted more before its pause took (or was resumed).
        this.backlog.push(chunk);
        this.socket.pause();
        return;
      }
      const at = this.reader.push(chunk);
      if (at < chunk.length) {
        // FRAMES_PER_SLICE spent: the rest waits for a later turn, and so does the socket.
        this.backlog = [at === 0 ? chunk : chunk.subarray(at)];
        this.socket.pause();
        setImmediate(readSlice, this);
      }
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      return this.session.fail(err);
    }
    this.pauseIfOwed();
  }

  /**
   * A turn after reading yielded: the budget refilled, the backlog read as far as it goes; once it
   * is all read, the socket is resumed (unless the other side's unread answers hold it paused).
   */
  readSlice(): void {
    const { backlog } = this;
    if (!backlog) return;
    this.reader.budget = FRAMES_PER_SLICE;
    try {
      while (backlog.length > 0 && !this.session.isClosed()) {
        const chunk = backlog[0]!;
        const at = this.reader.push(chunk);
        if (at < chunk.length) {
          backlog[0] = chunk.subarray(at);
          setImmediate(readSlice, this);
          return this.pauseIfOwed();
        }
        backlog.shift();
      }
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      this.session.fail(err);
    }
    this.backlog = undefined;
    if (!this.session.isClosed()) {
      this.pauseIfOwed();
      if (this.endAfterBacklog) this.session.peerEnded();
      else if (!this.readPaused) this.socket.resume();
    }
    this.endAfterBacklog = false;
    if (this.closeAfterBacklog) {
      this.closeAfterBacklog = false;
      this.session.socketClosed();
    }
  }

  /** Reading stops while the other side reads none of its answers (PAUSE_OWED_ANSWERS). */
  private pauseIfOwed(): void {
    if (this.session.owedAnswers() > PAUSE_OWED_ANSWERS && !this.readPaused && !this.session.isClosed()) {
      // The other side does not read what it asks for: its frames wait in its own buffers now.
      this.readPaused = true;
      this.socket.pause();
      this.stallTimer = setTimeout(stalled, STALLED_ANSWERS_MS, this);
      this.stallTimer.unref();
    }
  }

  /** Reading stayed paused for STALLED_ANSWERS_MS: the other side reads nothing it asked for. */
  stalled(): void {
    if (this.readPaused && !this.session.isClosed())
      this.session.fail(floodError(`${this.session.owedAnswers()} answers not read for ${STALLED_ANSWERS_MS} ms`));
  }
}

function readSlice(input: SessionInput): void {
  input.readSlice();
}

function stalled(input: SessionInput): void {
  input.stalled();
}
