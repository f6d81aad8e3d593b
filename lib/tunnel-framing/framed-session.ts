// A framed tunnel session: many streams over one connection (a TLS socket), in the frames of
// frames.ts. docs/tunnel-framing.md describes the protocol; this file is its socket side.
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import { FrameReader } from './frame-reader.js';
import { FramedStream, type StreamSession } from './framed-stream.js';
import {
  type AnswerPayload,
  controlFrame,
  decodeAnswer,
  decodeGoAway,
  decodeOpen,
  decodeReset,
  decodeWindow,
  encodeAnswer,
  encodeGoAway,
  encodeOpen,
  encodeReset,
  encodeWindow,
  FLAG_ACK,
  FLAG_END,
  FrameError,
  floodError,
  frameHeader,
  FrameType,
  type GoAwayPayload,
  type OpenPayload,
  WireError,
  wireErrorName,
} from './frames.js';

export interface FramedSessionOptions {
  /**
   * Which end of the connection this is. The dialer opens odd-numbered streams, the listener
   * even-numbered ones, so both may open without choosing the same id.
   */
  side: 'dialer' | 'listener';
  /**
   * A stream the other side opened: answer it (`stream.respond`) when its target is reached or
   * refused. Without it every open is refused with 501.
   */
  onOpen?: (stream: FramedStream, open: OpenPayload) => void;
  /** Streams the other side may hold open at once; opens past it are reset REFUSED_STREAM (default 1000). */
  maxConcurrentStreams?: number;
  /**
   * Streams the other side may reset before this side answered them (or have refused) in a burst,
   * and how fast that budget comes back per second: past it the session ends with
   * ENHANCE_YOUR_CALM, as nghttp2 does against a rapid-reset flood (its defaults: 1000, 33 per
   * second). See `spendReset` for what counts.
   */
  resetBurst?: number;
  resetsPerSecond?: number;
  /** Per-stream and connection windows (defaults: 1 MiB and 16 MiB). */
  streamWindow?: number;
  connectionWindow?: number;
  /**
   * The other side is not admitted yet (an agent that has not described itself): until `admit()`
   * it may do almost nothing (docs/tunnel-framing.md, "Limits"). Past any bound the session ends
   * with GOAWAY ENHANCE_YOUR_CALM (GATE_ERR_TUNNEL_FLOOD).
   */
  untilAdmitted?: AdmissionLimits;
}

/** What a session's other side may do before it is admitted. */
export interface AdmissionLimits {
  /** PINGs answered (an agent sends one at start, then one per heartbeat interval). */
  pings: number;
  /** Bytes read from the connection, all frames counted. */
  bytes: number;
  /** Frames that carry nothing (see IDLE_FRAME_BURST), with no refill. */
  idleFrames: number;
}

/**
 * The windows: 1 MiB per stream and 16 MiB per connection, the sizes the HTTP/2 tunnel uses
 * (lib/tunnel/settings.ts), for the same reason: a bulk stream through a WAN tunnel needs more
 * than 64 KiB per round trip, and one slow reader must not make the other side buffer without end.
 */
export const DEFAULT_STREAM_WINDOW = 1 << 20;
export const DEFAULT_CONNECTION_WINDOW = 16 << 20;

/** A turn's frames up to this size are joined into one buffer before they are written. */
const JOIN_LIMIT_BYTES = 16 * 1024;

/**
 * Control answers (PING ACKs, WINDOWs, the session's refusals) queued and not yet written: past
 * this count the session ends with ENHANCE_YOUR_CALM. nghttp2 bounds its outbound queue of such
 * frames the same way, in frames and not bytes (max_outbound_ack, NGHTTP2_DEFAULT_MAX_OBQ_FLOOD_ITEM:
 * 1000): each is an object however small, and a peer that never reads them would have them pile up.
 */
export const MAX_OWED_ANSWERS = 1000;

/**
 * Past this many unwritten answers the other side is not reading what it asked for: the session
 * stops reading its socket until they are written (their write calls back), so a flood stays in
 * the peer's own buffers and costs this side nothing. Answers, not bytes: this side's DATA backlog
 * never pauses reading, or two sides sending bulk to each other could each wait for the other.
 */
export const PAUSE_OWED_ANSWERS = 64;

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

/**
 * Frames that carry nothing a burst may hold, and how many come back per second: DATA with no
 * payload and no END (CVE-2019-9518), a WINDOW of less than a useful increment (CVE-2019-9511: a
 * peer returning credit a byte at a time makes a frame of work per byte), a PING ACK for no PING
 * of ours, a frame of a type this version does not know. Past it: ENHANCE_YOUR_CALM. Node's http2
 * counts the empty frames as invalid ones (maxSessionInvalidFrames, 1000).
 */
export const IDLE_FRAME_BURST = 1000;
export const IDLE_FRAMES_PER_SECOND = 100;

/** A WINDOW increment below this (or an eighth of the stream window, if less) is an idle frame. */
const MIN_USEFUL_INCREMENT = 1024;

/**
 * This side's own output waiting in the socket, past which its streams stop sending (they wait as
 * for credit) until the socket drains: a peer that grants credit and does not read would otherwise
 * have this side buffer every byte its clients send (CVE-2019-9517).
 */
export const OUTPUT_HIGH_BYTES = 4 << 20;

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

/** In a gathered write, runs of pieces smaller than this are joined: tiny frames are not an object each. */
const SMALL_PIECE_BYTES = 1024;

/** A turn's write, and what to do once it is out: its DATA's `written` callbacks, its answers' count. */
interface Flight {
  written: Array<() => void> | undefined;
  owed: number;
}

/**
 * One end of a framed tunnel session on `socket`. `open` starts a stream; the other side's opens
 * come to `onOpen`. Events: 'goaway' (GoAwayPayload: the other side takes no new streams) and
 * 'close' (GateError | undefined: the session is over, every stream closed).
 *
 * What it keeps, as HTTP/2 kept it for the tunnel: per-stream and connection credit (a stream that
 * is not read holds at most its window, all of them at most the connection's), a FIN each way, a
 * reset with a code and a reason, refusal of streams past the concurrency limit, a budget of
 * resets, a bound on frame size, GOAWAY with drain, and PING. A frame that breaks the framing
 * ends the session with a GOAWAY naming why (GATE_ERR_TUNNEL_PROTOCOL), never touching another
 * session.
 *
 * Output is gathered: frames made during one turn of the event loop leave in one write.
 */
export class FramedSession extends EventEmitter implements StreamSession {
  private readonly streams = new Map<number, FramedStream>();
  private readonly reader: FrameReader;
  private nextId: number;
  /** The highest id the other side opened so far. */
  private lastPeerId = 0;
  /**
   * Streams the other side opened that are still open on the wire: not reset or refused, and not
   * both FINs sent. What the concurrency limit counts.
   */
  private peerStreams = 0;
  /**
   * The other side's streams with one FIN crossed (1) or both (2, out of `peerStreams` already):
   * the limit counts a stream as HTTP/2 does (RFC 9113 §5.1: closed once both END_STREAMs have
   * passed), not until its last bytes are delivered here. The opener counts its streams until
   * they close on its side, which is never before that: so an opener that keeps under the limit
   * by its own count (the proxy, settings.ts) is never refused. Were a stream counted here until
   * delivered (a target that stopped reading), the two counts would part.
   */
  private readonly peerFins = new Map<FramedStream, number>();
  /** Connection credit the other side gave, not yet spent. */
  private credit: number;
  /** Connection bytes the other side may still send. */
  private allowance: number;
  private unreturned = 0;
  private readonly waiting = new Set<FramedStream>();
  private readonly pings = new Map<bigint, { at: bigint; done: (err: GateError | undefined, ms: number) => void }>();
  private pingSeq = 0n;
  private resetTokens: number;
  private resetRefilledAt = Date.now();
  /** Frames made this turn of the event loop, and their size: written together at its end. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The `written` callbacks of this turn's DATA: they run when the turn's write completes. */
  private pendingWritten: Array<() => void> | undefined = undefined;
  /** Control answers among this turn's frames, and all not written yet (this turn's included). */
  private pendingOwed = 0;
  private owed = 0;
  /** Writes made and not called back yet, in order (a socket calls its writes back in order). */
  private readonly flights: Flight[] = [];
  private readonly onFlightWritten = (): void => this.flightWritten();
  /** Reading stopped: the other side does not read its answers (PAUSE_OWED_ANSWERS), since when. */
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
  /** This side's output (queued this turn, or in the socket) is past OUTPUT_HIGH_BYTES: streams wait for 'drain'. */
  private outputFull = false;
  private drainArmed = false;
  private readonly onOutputDrained = (): void => this.outputDrained();
  private idleTokens: number;
  private idleRefilledAt = Date.now();
  private readonly minUsefulIncrement: number;
  /** Until `admit()`: what the other side may still do (AdmissionLimits), counted down. */
  private admission: AdmissionLimits | undefined;
  /** 'close' is told once the socket has closed after a GOAWAY that ended the session (goAwayNow). */
  private closeTold = false;
  private closeDeferred = false;
  /** Bytes read and dropped after the session ended (DISCARD_LIMIT_BYTES). */
  private discarded = 0;
  /** Set once this side sent GOAWAY: the other side's new opens are refused. */
  private goingAway = false;
  /** Set once the other side sent GOAWAY: no new opens here. */
  private peerGoAway: GoAwayPayload | undefined = undefined;
  private ended = false;
  private closedWith: { error: GateError | undefined } | undefined = undefined;
  private readonly maxConcurrent: number;
  private readonly resetBurst: number;
  private readonly resetsPerSecond: number;
  private readonly streamWindow: number;
  private readonly connectionWindow: number;

  constructor(
    private readonly socket: Duplex,
    private readonly options: FramedSessionOptions,
  ) {
    super();
    this.nextId = options.side === 'dialer' ? 1 : 2;
    this.maxConcurrent = options.maxConcurrentStreams ?? 1000;
    this.resetBurst = options.resetBurst ?? 1000;
    this.resetsPerSecond = options.resetsPerSecond ?? 33;
    this.resetTokens = this.resetBurst;
    this.streamWindow = options.streamWindow ?? DEFAULT_STREAM_WINDOW;
    this.connectionWindow = options.connectionWindow ?? DEFAULT_CONNECTION_WINDOW;
    this.credit = this.connectionWindow;
    this.allowance = this.connectionWindow;
    this.idleTokens = IDLE_FRAME_BURST;
    this.minUsefulIncrement = Math.min(MIN_USEFUL_INCREMENT, Math.floor(this.streamWindow / 8));
    this.admission = options.untilAdmitted && { ...options.untilAdmitted };
    this.reader = new FrameReader((type, flags, id, payload) => this.frame(type, flags, id, payload));
    this.reader.budget = FRAMES_PER_SLICE;
    // Nagle off, as Node's HTTP/2 sets it on its sockets: the session gathers a turn's frames
    // itself, and a small frame held for an ACK is a client's first byte held for a round trip.
    (socket as Duplex & { setNoDelay?: (noDelay: boolean) => unknown }).setNoDelay?.(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => {
      if (this.backlog) this.endAfterBacklog = true;
      else this.peerEnded();
    });
    socket.on('error', (err: Error) =>
      this.finish(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `tunnel connection failed: ${err.message}`, { cause: err })),
    );
    socket.on('close', () => {
      if (this.backlog && !this.closedWith) this.closeAfterBacklog = true;
      else this.socketClosed();
    });
  }

  /**
   * Connection credit this side may spend on DATA now: the other side's grant, or none while this
   * side's own output waits in the socket past OUTPUT_HIGH_BYTES.
   */
  get sendCredit(): number {
    return this.outputFull ? 0 : this.credit;
  }

  /** The other side is admitted: the limits of `untilAdmitted` no longer apply. */
  admit(): void {
    this.admission = undefined;
  }

  /** Control answers queued and not written yet (a measure for tests; MAX_OWED_ANSWERS bounds it). */
  get owedAnswers(): number {
    return this.owed;
  }

  /** True once the session can open no more streams (GOAWAY either way, or closed). */
  get closing(): boolean {
    return this.goingAway || this.peerGoAway !== undefined || this.closedWith !== undefined;
  }

  /** True once the session is over: every stream closed. */
  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /**
   * Why the session ended, once `closed` (undefined for a clean end). 'close' tells the same, but
   * after a GOAWAY that ended it only once the socket has closed (goAwayNow).
   */
  get closeError(): GateError | undefined {
    return this.closedWith?.error;
  }

  /** The same as `closed`, under the name an Http2Session gives it (heartbeat.ts reads either). */
  get destroyed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Streams open now, both ways. */
  get openStreams(): number {
    return this.streams.size;
  }

  /**
   * Opens a stream; bytes may be written to it at once, before the answer ('response'), and are
   * held by the other side until it has dialled. GATE_ERR_AGENT_STREAM_FAILED when the session
   * takes no new streams.
   */
  open(open: OpenPayload): FramedStream {
    if (this.closing) {
      const why = this.peerGoAway ? `the other side sent GOAWAY (${wireErrorName(this.peerGoAway.code)})` : 'the session is closing';
      throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, `no new streams: ${why}`);
    }
    if (this.nextId > 0x7fffffff) throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'no new streams: stream ids exhausted');
    // Encoded first: a target it refuses (GATE_ERR_INVALID_ARGUMENT) leaves no stream behind.
    const payload = encodeOpen(open);
    const stream = new FramedStream(this, this.nextId, this.streamWindow, true);
    this.nextId += 2;
    this.streams.set(stream.id, stream);
    this.queue(controlFrame(FrameType.OPEN, 0, stream.id, payload));
    return stream;
  }

  /**
   * Sends a PING; `done` gets the round trip in milliseconds, or the error that ended the session.
   * Returns true, as Http2Session.ping does when the PING is sent (heartbeat.ts takes either).
   */
  ping(done: (err: GateError | undefined, ms: number) => void): boolean {
    if (this.closedWith) {
      done(new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, 'the session is closed'), 0);
      return true;
    }
    const seq = this.pingSeq++;
    this.pings.set(seq, { at: process.hrtime.bigint(), done });
    const payload = Buffer.allocUnsafe(8);
    payload.writeBigUInt64BE(seq, 0);
    this.queue(controlFrame(FrameType.PING, 0, 0, payload));
    return true;
  }

  /**
   * No new streams, either way: the other side is told with GOAWAY (`code`, `reason`); the streams
   * open now finish, then the connection ends.
   */
  goAway(code: number = WireError.NO_ERROR, reason = ''): void {
    if (this.goingAway || this.closedWith) return;
    this.goingAway = true;
    this.queue(controlFrame(FrameType.GOAWAY, 0, 0, encodeGoAway({ lastStreamId: this.lastPeerId, code, reason })));
    this.endIfIdle();
  }

  /** Ends every stream and the connection now; `error` is the session's ('close'). */
  destroy(error?: GateError): void {
    this.finish(error);
    this.socket.destroy();
  }

  // --- StreamSession: what the streams ask of it ---

  sendData(stream: FramedStream, payload: Buffer | undefined, end: boolean, written?: () => void): void {
    const length = payload?.length ?? 0;
    this.credit -= length;
    if (end && !stream.opened) this.peerFin(stream);
    this.queue(frameHeader(FrameType.DATA, end ? FLAG_END : 0, stream.id, length));
    if (payload) this.queue(payload);
    if (!written) return;
    if (this.closedWith) queueMicrotask(written);
    else (this.pendingWritten ??= []).push(written);
  }

  sendWindow(id: number, increment: number): void {
    // Owed: the other side's DATA asked for it (how many is bounded by the credit, not a flood).
    this.owe();
    this.queue(controlFrame(FrameType.WINDOW, 0, id, encodeWindow(increment)));
  }

  sendReset(id: number, code: number, reason: string): void {
    this.queue(controlFrame(FrameType.RESET, 0, id, encodeReset({ code, reason })));
  }

  sendAnswer(id: number, answer: AnswerPayload): void {
    this.queue(controlFrame(FrameType.ANSWER, 0, id, encodeAnswer(answer)));
  }

  consumed(bytes: number): void {
    this.unreturned += bytes;
    if (this.unreturned < this.connectionWindow / 2 || this.closedWith) return;
    this.allowance += this.unreturned;
    this.sendWindow(0, this.unreturned);
    this.unreturned = 0;
  }

  waitForCredit(stream: FramedStream): void {
    this.waiting.add(stream);
  }

  forget(stream: FramedStream): void {
    if (this.streams.get(stream.id) !== stream) return;
    this.streams.delete(stream.id);
    this.waiting.delete(stream);
    if (!stream.opened) {
      if (this.peerFins.get(stream) !== 2) this.peerStreams--;
      this.peerFins.delete(stream);
    }
    this.endIfIdle();
  }

  /** A FIN of the other side's stream crossed the wire, either way; at the second it leaves the limit. */
  private peerFin(stream: FramedStream): void {
    const fins = (this.peerFins.get(stream) ?? 0) + 1;
    this.peerFins.set(stream, fins);
    if (fins === 2) this.peerStreams--;
  }

  // --- the wire ---

  private queue(bytes: Buffer): void {
    if (this.closedWith) return;
    if (this.pending.length === 0) setImmediate(flushSession, this);
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    // One turn may not queue more than the bound either (streams written in a loop).
    if (this.pendingBytes >= OUTPUT_HIGH_BYTES) this.outputFull = true;
  }

  /**
   * The turn's frames in one write. Small ones (a connection's opening, its answer, a turn of a
   * request and its response) are joined into one buffer: one copy of a few KiB costs less than
   * the Writable's list and a gathered write. Bulk goes as a gathered write, with no copy.
   */
  flush(): void {
    const { pending, pendingBytes, pendingWritten, pendingOwed, socket } = this;
    if (pending.length === 0) return;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingWritten = undefined;
    this.pendingOwed = 0;
    if (socket.destroyed) {
      // Dropped: told as a failed write would be, after this call (as sendData tells a late one).
      this.owed -= pendingOwed;
      if (pendingWritten) for (const written of pendingWritten) queueMicrotask(written);
      return;
    }
    // The socket calls back once the write is out (or failed): the payloads are no longer held,
    // the answers no longer owed.
    let done: (() => void) | undefined;
    if (pendingWritten !== undefined || pendingOwed > 0) {
      this.flights.push({ written: pendingWritten, owed: pendingOwed });
      done = this.onFlightWritten;
    }
    if (pending.length === 1) socket.write(pending[0]!, done);
    else if (pendingBytes <= JOIN_LIMIT_BYTES) socket.write(Buffer.concat(pending, pendingBytes), done);
    else writeGathered(socket, pending, done);
    if (socket.writableLength >= OUTPUT_HIGH_BYTES) this.outputFull = true;
    if (this.outputFull && !this.drainArmed) {
      // 'drain' comes: a write of this size went past the socket's high-water mark (false).
      this.drainArmed = true;
      socket.once('drain', this.onOutputDrained);
    }
  }

  private flightWritten(): void {
    const flight = this.flights.shift();
    if (!flight) return;
    this.owed -= flight.owed;
    if (flight.written) runAll(flight.written);
    if (this.readPaused && this.owed <= PAUSE_OWED_ANSWERS / 2 && !this.closedWith) {
      this.readPaused = false;
      clearTimeout(this.stallTimer);
      if (!this.backlog) this.socket.resume();
    }
  }

  /** The socket took this side's output: streams waiting for it send again. */
  private outputDrained(): void {
    this.drainArmed = false;
    this.outputFull = false;
    this.wakeWaiting();
  }

  private wakeWaiting(): void {
    for (const stream of this.waiting) {
      if (this.sendCredit <= 0) break;
      this.waiting.delete(stream);
      stream.creditArrived();
    }
  }

  private read(chunk: Buffer): void {
    if (this.closedWith) {
      this.discarded += chunk.length;
      if (this.discarded > DISCARD_LIMIT_BYTES) this.socket.destroy();
      return;
    }
    try {
      if (this.admission) {
        this.admission.bytes -= chunk.length;
        if (this.admission.bytes < 0) throw floodError('more bytes than a session may send before it is admitted');
      }
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
      return this.fail(err);
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
      while (backlog.length > 0 && !this.closedWith) {
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
      this.fail(err);
    }
    this.backlog = undefined;
    if (!this.closedWith) {
      this.pauseIfOwed();
      if (this.endAfterBacklog) this.peerEnded();
      else if (!this.readPaused) this.socket.resume();
    }
    this.endAfterBacklog = false;
    if (this.closeAfterBacklog) {
      this.closeAfterBacklog = false;
      this.socketClosed();
    }
  }

  /** The socket closed: the session is over, if it was not already; 'close' told if it waited for this. */
  private socketClosed(): void {
    this.finish(this.ended ? undefined : new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'tunnel connection closed'));
    if (this.closeDeferred) this.tellClose();
  }

  /** Reading stops while the other side reads none of its answers (PAUSE_OWED_ANSWERS). */
  private pauseIfOwed(): void {
    if (this.owed > PAUSE_OWED_ANSWERS && !this.readPaused && !this.closedWith) {
      // The other side does not read what it asks for: its frames wait in its own buffers now.
      this.readPaused = true;
      this.socket.pause();
      this.stallTimer = setTimeout(stalledSession, STALLED_ANSWERS_MS, this);
      this.stallTimer.unref();
    }
  }

  /** Reading stayed paused for STALLED_ANSWERS_MS: the other side reads nothing it asked for. */
  stalled(): void {
    if (this.readPaused && !this.closedWith) this.fail(floodError(`${this.owed} answers not read for ${STALLED_ANSWERS_MS} ms`));
  }

  /** The other side broke the framing: told why in a GOAWAY, then the session ends. */
  private fail(error: FrameError): void {
    this.goAwayNow(error.wireCode, error.message, error);
  }

  /**
   * Ends the session now and tells the other side why: GOAWAY (`code`, `reason`) written at once,
   * every stream closed, `error` the session's ('close'), then this side's FIN. The other side is
   * given `graceMs` to close its own end before the connection is cut. For a refusal (the proxy
   * refusing an agent) and for a peer that broke the framing.
   */
  goAwayNow(code: number, reason: string, error: GateError | undefined, graceMs = 1000): void {
    if (this.closedWith) return;
    this.goingAway = true;
    const goAway = encodeGoAway({ lastStreamId: this.lastPeerId, code, reason });
    const { socket } = this;
    this.flush();
    // Written, then this side's FIN, and 'close' told only once the socket has closed: a listener
    // that destroys the socket at 'close' would otherwise drop the GOAWAY unsent. Reading goes on
    // (and is dropped, DISCARD_LIMIT_BYTES) meanwhile: a socket closed with unread bytes sends a
    // TCP RST, which may discard the GOAWAY at the other end before it is read. Not for a side
    // that reads none of its answers (reading paused): it will not read the GOAWAY either.
    if (!socket.destroyed) {
      this.closeDeferred = true;
      socket.write(controlFrame(FrameType.GOAWAY, 0, 0, goAway));
      socket.end();
      if (!this.readPaused) socket.resume();
      const cutOff = setTimeout(() => socket.destroy(), graceMs);
      cutOff.unref();
      socket.once('close', () => clearTimeout(cutOff));
    }
    this.ended = true;
    this.finish(error);
  }

  private frame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.closedWith) return;
    switch (type) {
      case FrameType.DATA:
        return this.data(id, flags, payload);
      case FrameType.OPEN:
        return this.peerOpen(id, payload);
      case FrameType.ANSWER: {
        const stream = this.streamFor(id, 'ANSWER');
        if (!stream) return;
        if (!stream.opened || stream.answer)
          throw new FrameError(WireError.PROTOCOL_ERROR, `an ANSWER for stream ${id}, which it cannot answer`);
        return stream.receiveAnswer(decodeAnswer(payload));
      }
      case FrameType.WINDOW:
        return this.window(id, decodeWindow(payload));
      case FrameType.RESET: {
        const reset = decodeReset(payload);
        const stream = this.streamFor(id, 'RESET');
        if (!stream) return;
        // Only a stream reset before this side answered it: see spendReset.
        if (!stream.opened && !stream.answered) this.spendReset();
        return stream.receiveReset(reset.code, reset.reason);
      }
      case FrameType.GOAWAY:
        if (id !== 0) throw new FrameError(WireError.PROTOCOL_ERROR, `a GOAWAY on stream ${id}`);
        return this.peerGoingAway(decodeGoAway(payload));
      case FrameType.PING:
        return this.pinged(id, flags, payload);
      default:
        // A frame type of a later version: ignored, as HTTP/2 ignores unknown frames (but not
        // without end: it is work that carries nothing here).
        return this.spendIdle('frames of unknown types');
    }
  }

  private data(id: number, flags: number, payload: Buffer): void {
    if (payload.length > this.allowance)
      throw new FrameError(
        WireError.FLOW_CONTROL_ERROR,
        `DATA past the connection's credit (${payload.length} bytes, ${this.allowance} left)`,
      );
    this.allowance -= payload.length;
    // An empty frame that is not a FIN carries nothing (a piece of a longer frame is never empty).
    if (payload.length === 0 && (flags & FLAG_END) === 0) this.spendIdle('empty DATA frames');
    const stream = this.streamFor(id, 'DATA');
    if (!stream) {
      // A stream closed meanwhile (reset, refused): its bytes still count, and give their credit back.
      this.consumed(payload.length);
      return;
    }
    if (stream.opened && !stream.answer) throw new FrameError(WireError.PROTOCOL_ERROR, `DATA on stream ${id} before its ANSWER`);
    if (stream.finReceived) throw new FrameError(WireError.STREAM_CLOSED, `DATA on stream ${id} after its FIN`);
    const end = (flags & FLAG_END) !== 0;
    if (end && !stream.opened) this.peerFin(stream);
    if (!stream.receiveData(payload, end)) throw new FrameError(WireError.FLOW_CONTROL_ERROR, `DATA past stream ${id}'s credit`);
  }

  private window(id: number, increment: number): void {
    if (increment < this.minUsefulIncrement) this.spendIdle('WINDOW increments too small to be useful');
    if (id === 0) {
      if (this.credit + increment > 0x7fffffff) throw new FrameError(WireError.FLOW_CONTROL_ERROR, 'connection credit past 2^31-1');
      this.credit += increment;
      this.wakeWaiting();
      return;
    }
    const stream = this.streamFor(id, 'WINDOW');
    if (stream && !stream.receiveWindow(increment)) throw new FrameError(WireError.FLOW_CONTROL_ERROR, `stream ${id}'s credit past 2^31-1`);
  }

  private peerOpen(id: number, payload: Buffer): void {
    const peerParity = this.options.side === 'dialer' ? 0 : 1;
    if (id === 0 || id % 2 !== peerParity || id <= this.lastPeerId)
      throw new FrameError(WireError.PROTOCOL_ERROR, `an OPEN of stream ${id}, not a new id of the other side`);
    const open = decodeOpen(payload);
    this.lastPeerId = id;
    if (this.admission) throw floodError('an OPEN before the session was admitted');
    if (this.goingAway) return this.refuseOpen(id, 'the session is going away');
    if (this.peerStreams >= this.maxConcurrent) {
      this.spendReset();
      return this.refuseOpen(id, `more than ${this.maxConcurrent} concurrent streams`);
    }
    if (!this.options.onOpen) {
      // A side that takes no streams (the proxy, from an agent) refuses each; a flood of opens
      // spends the budget a flood of resets would, and answers never read are bounded as well.
      this.spendReset();
      this.oweOrCut();
      this.sendAnswer(id, { status: 501, code: '', reason: 'this side takes no streams' });
      return;
    }
    const stream = new FramedStream(this, id, this.streamWindow, false);
    this.streams.set(id, stream);
    this.peerStreams++;
    this.options.onOpen(stream, open);
  }

  private refuseOpen(id: number, reason: string): void {
    this.oweOrCut();
    this.sendReset(id, WireError.REFUSED_STREAM, reason);
  }

  /**
   * The stream a frame names, or undefined when it has closed. A frame naming a stream that was
   * never opened breaks the framing.
   */
  private streamFor(id: number, what: string): FramedStream | undefined {
    const stream = this.streams.get(id);
    if (stream) return stream;
    const ours = id % 2 === (this.options.side === 'dialer' ? 1 : 0);
    if (id === 0 || (ours ? id >= this.nextId : id > this.lastPeerId))
      throw new FrameError(WireError.PROTOCOL_ERROR, `${what} for stream ${id}, never opened`);
    return undefined;
  }

  private pinged(id: number, flags: number, payload: Buffer): void {
    if (id !== 0 || payload.length !== 8)
      throw new FrameError(WireError.FRAME_SIZE_ERROR, `a PING of ${payload.length} bytes on stream ${id}`);
    if ((flags & FLAG_ACK) === 0) {
      if (this.admission && --this.admission.pings < 0) throw floodError('more PINGs than a session may send before it is admitted');
      this.oweOrCut();
      this.queue(controlFrame(FrameType.PING, FLAG_ACK, 0, payload));
      return;
    }
    const seq = payload.readBigUInt64BE(0);
    const ping = this.pings.get(seq);
    if (!ping) return this.spendIdle('PING ACKs for no PING');
    this.pings.delete(seq);
    ping.done(undefined, Number(process.hrtime.bigint() - ping.at) / 1e6);
  }

  /** One more control answer queued, to be written. */
  private owe(): void {
    this.pendingOwed++;
    this.owed++;
  }

  /**
   * The same, for an answer a frame of the other side asks for (a PING, an open refused): past
   * MAX_OWED_ANSWERS unwritten, it asks faster than it reads, and the session ends. (WINDOWs are
   * counted but not cut here: a stream's reader makes them, and the credit bounds how many.)
   */
  private oweOrCut(): void {
    if (this.owed >= MAX_OWED_ANSWERS) throw floodError(`more than ${MAX_OWED_ANSWERS} answers owed and not read`);
    this.owe();
  }

  /** One frame that carries nothing: past the budget (IDLE_FRAME_BURST, or admission's), the session ends. */
  private spendIdle(what: string): void {
    if (this.admission) {
      if (--this.admission.idleFrames < 0) throw floodError(`too many ${what} before the session was admitted`);
      return;
    }
    const now = Date.now();
    this.idleTokens = Math.min(IDLE_FRAME_BURST, this.idleTokens + ((now - this.idleRefilledAt) / 1000) * IDLE_FRAMES_PER_SECOND);
    this.idleRefilledAt = now;
    if (this.idleTokens < 1) throw floodError(`too many ${what}`);
    this.idleTokens--;
  }

  /**
   * One reset (or refused open) of the other side's: past the budget, the session ends.
   *
   * What counts is what a rapid-reset attacker does (CVE-2023-44487), and nothing an honest opener
   * does on its clients' behalf (issue 37): a stream reset before this side answered it, whose
   * work (the dial) goes on after its slot in the concurrency limit is free again, and an open
   * past the limit or of a side that takes none. A stream reset after the answer is not counted:
   * its work was done while it held its slot, so the limit bounds it already. An opener that kept
   * to the limit and reset only answered streams could otherwise still be cut off, and every
   * stream of the session with it, by clients leaving early against targets that ignore the FIN
   * (the proxy resets those after its release grace, framed-relay.ts). The proxy, for its part,
   * never resets a stream before its answer, and never opens past the limit (settings.ts).
   */
  private spendReset(): void {
    const now = Date.now();
    this.resetTokens = Math.min(this.resetBurst, this.resetTokens + ((now - this.resetRefilledAt) / 1000) * this.resetsPerSecond);
    this.resetRefilledAt = now;
    if (this.resetTokens < 1) throw new FrameError(WireError.ENHANCE_YOUR_CALM, 'too many streams reset or refused (rapid reset)');
    this.resetTokens--;
  }

  private peerGoingAway(goAway: GoAwayPayload): void {
    if (this.peerGoAway) return;
    this.peerGoAway = goAway;
    // Streams of ours the other side never saw: refused, so their opener may try elsewhere.
    for (const stream of [...this.streams.values()]) {
      if (stream.opened && stream.id > goAway.lastStreamId) stream.close(WireError.REFUSED_STREAM, `GOAWAY: ${goAway.reason}`, true);
    }
    this.emit('goaway', goAway);
    this.endIfIdle();
  }

  /** Once no stream is left after a GOAWAY (either way), this side ends the connection. */
  private endIfIdle(): void {
    if (this.streams.size > 0 || this.ended || this.closedWith || !(this.goingAway || this.peerGoAway)) return;
    this.ended = true;
    setImmediate(() => {
      this.flush();
      this.socket.end();
    });
  }

  /** The other side's FIN: after a GOAWAY with no stream left it is the end; before, a lost session. */
  private peerEnded(): void {
    if (this.streams.size === 0 && (this.goingAway || this.peerGoAway)) {
      this.ended = true;
      this.flush();
      if (!this.socket.writableEnded) this.socket.end();
      return;
    }
    this.destroy(new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'the other side closed the tunnel connection'));
  }

  /** The session is over: every stream closed, every ping answered with the error. Once. */
  private finish(error: GateError | undefined): void {
    if (this.closedWith) return;
    this.closedWith = { error };
    clearTimeout(this.stallTimer);
    const why = error?.message ?? 'the session closed';
    for (const stream of [...this.streams.values()]) stream.close(WireError.CANCEL, why, true);
    for (const ping of this.pings.values())
      ping.done(error ?? new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, 'the session closed before the PING was answered'), 0);
    this.pings.clear();
    this.waiting.clear();
    if (!this.closeDeferred) this.tellClose();
  }

  /** 'close', once: at finish, or after goAwayNow once the socket has closed. */
  private tellClose(): void {
    if (this.closeTold) return;
    this.closeTold = true;
    this.emit('close', this.closedWith?.error);
  }
}

function flushSession(session: FramedSession): void {
  session.flush();
}

function readSlice(session: FramedSession): void {
  session.readSlice();
}

function stalledSession(session: FramedSession): void {
  session.stalled();
}

function runAll(callbacks: Array<() => void>): void {
  for (const callback of callbacks) callback();
}

/**
 * A large turn as a gathered write, with no copy of its bulk; runs of small pieces between (many
 * tiny frames) are joined, so the socket's queue holds a bounded number of objects per byte.
 */
function writeGathered(socket: Duplex, pending: Buffer[], done: (() => void) | undefined): void {
  socket.cork();
  const last = pending.length - 1;
  let runFrom = -1;
  let runBytes = 0;
  for (let i = 0; i <= last; i++) {
    const piece = pending[i]!;
    if (piece.length < SMALL_PIECE_BYTES && i < last) {
      if (runFrom < 0) runFrom = i;
      runBytes += piece.length;
      continue;
    }
    if (runFrom >= 0) {
      // A run of one small piece (a DATA header before its payload) is written as it is.
      socket.write(i - runFrom === 1 ? pending[runFrom]! : Buffer.concat(pending.slice(runFrom, i), runBytes));
      runFrom = -1;
      runBytes = 0;
    }
    socket.write(piece, i === last ? done : undefined);
  }
  socket.uncork();
}
