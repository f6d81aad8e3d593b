// A framed tunnel session: many streams over one connection (a TLS socket), in the frames of
// frames.ts (docs/tunnel-framing.md). Its rooms: stream-table.ts, flood-budgets.ts, ping-table.ts,
// session-input.ts, session-output.ts, connection-credit.ts, peer-frames.ts, peer-open.ts
// (docs/tunnel-framing-implementation.md).
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { ErrorCodes, GateError } from '../errors.js';
import { ConnectionCredit } from './connection-credit.js';
import { FloodBudgets, minUsefulIncrement } from './flood-budgets.js';
import { FramedStream, type StreamSession } from './framed-stream.js';
import {
  type AnswerPayload,
  controlFrame,
  decodeAnswer,
  decodeForStream,
  decodeHello,
  decodeOpen,
  encodeAnswer,
  encodeGoAway,
  encodeHello,
  encodeOpen,
  encodeReset,
  encodeWindow,
  FLAG_ACK,
  FLAG_END,
  FrameError,
  frameHeader,
  FrameType,
  type GoAwayPayload,
  type HelloPayload,
  type OpenPayload,
  type ResetPayload,
  StreamFrameError,
  WireError,
  wireErrorName,
} from './frames.js';
import { dispatchPeerFrame, type PeerFrames } from './peer-frames.js';
import { judgeOpen } from './peer-open.js';
import { type PingDone, PingTable } from './ping-table.js';
import { SessionInput } from './session-input.js';
import { DEFAULT_CONNECTION_WINDOW, DEFAULT_MAX_STREAMS, DEFAULT_STREAM_WINDOW, type FramedSessionOptions } from './session-options.js';
import { SessionOutput } from './session-output.js';
import { StreamTable } from './stream-table.js';

export type { AdmissionLimits } from './flood-budgets.js';
export { DEFAULT_CONNECTION_WINDOW, DEFAULT_STREAM_WINDOW, type FramedSessionOptions } from './session-options.js';
export { IDLE_FRAME_BURST, IDLE_FRAMES_PER_SECOND } from './flood-budgets.js';
export { FRAMES_PER_SLICE, STALLED_ANSWERS_MS } from './session-input.js';
export { MAX_OWED_ANSWERS, OUTPUT_HIGH_BYTES, PAUSE_OWED_ANSWERS } from './session-output.js';
export { MAX_STREAM_ID } from './stream-table.js';
export type { PingDone } from './ping-table.js';

/**
 * One end of a framed tunnel session on `socket`. `open` starts a stream; the other side's opens
 * come to `onOpen`. Events: 'hello' (HelloPayload: the other side's HELLO came, and with it the
 * credit DATA waits for), 'goaway' (GoAwayPayload: the other side takes no new streams) and
 * 'close' (GateError | undefined: the session is over, every stream closed).
 *
 * Each side's first frame is its HELLO (its windows and its stream limit): this side sends no DATA
 * until the other side's has come, and then no more than it allows. What it keeps, as HTTP/2 kept
 * it for the tunnel: per-stream and connection credit, a FIN each way, a reset with a code and a
 * reason, refusal of streams past the concurrency limit, a budget of resets, a bound on frame size,
 * GOAWAY with drain, and PING. A frame that breaks the framing ends the session with a GOAWAY naming
 * why (GATE_ERR_TUNNEL_PROTOCOL), never touching another session.
 */
export class FramedSession extends EventEmitter implements StreamSession {
  private readonly table: StreamTable;
  private readonly input: SessionInput;
  private readonly output: SessionOutput;
  private readonly budgets: FloodBudgets;
  /** The other side's HELLO, once it came: what this side may send. */
  private peerHello: HelloPayload | undefined = undefined;
  private readonly connection: ConnectionCredit;
  private readonly pings = new PingTable();
  /** A WINDOW increment below this is an idle frame (the other side's HELLO sets it). */
  private minIncrement = 1;
  /** 'close' is told once the socket has closed after a GOAWAY that ended the session (goAwayNow). */
  private closeTold = false;
  private closeDeferred = false;
  /** Set once this side sent GOAWAY: the other side's new opens are refused. */
  private goingAway = false;
  /** Set once the other side sent GOAWAY: no new opens here. */
  private peerGoAway: GoAwayPayload | undefined = undefined;
  private ended = false;
  private closedWith: { error: GateError | undefined } | undefined = undefined;
  private readonly maxConcurrent: number;
  private readonly streamWindow: number;
  private readonly connectionWindow: number;
  /** What this session does with each of the other side's frames after its HELLO. */
  private readonly peerFrames: PeerFrames = {
    data: (id, flags, payload) => this.data(id, flags, payload),
    open: (id, payload) => this.peerOpen(id, payload),
    answer: (id, payload) => this.answered(id, payload),
    window: (id, increment) => this.window(id, increment),
    reset: (id, reset) => this.peerReset(id, reset),
    goAway: (goAway) => this.peerGoingAway(goAway),
    ping: (ack, payload) => this.pinged(ack, payload),
    unknown: () => this.budgets.spendIdle('frames of unknown types'),
  };

  constructor(
    private readonly socket: Duplex,
    private readonly options: FramedSessionOptions,
  ) {
    super();
    this.table = new StreamTable(options.side, options.firstStreamId);
    this.maxConcurrent = options.maxConcurrentStreams ?? DEFAULT_MAX_STREAMS;
    this.budgets = new FloodBudgets(options.resetBurst ?? 1000, options.resetsPerSecond ?? 33, options.untilAdmitted);
    this.streamWindow = options.streamWindow ?? DEFAULT_STREAM_WINDOW;
    this.connectionWindow = options.connectionWindow ?? DEFAULT_CONNECTION_WINDOW;
    this.output = new SessionOutput(socket, { drained: () => this.connection.wake(), written: () => this.input.answersWritten() });
    this.connection = new ConnectionCredit(this.connectionWindow, () => this.output.full);
    const hello = {
      streamWindow: this.streamWindow,
      connectionWindow: this.connectionWindow,
      maxStreams: options.onOpen ? this.maxConcurrent : 0,
    };
    this.output.queue(controlFrame(FrameType.HELLO, 0, 0, encodeHello(hello)));
    // Nagle off, as Node's HTTP/2 sets it on its sockets: the session gathers a turn's frames
    // itself, and a small frame held for an ACK is a client's first byte held for a round trip.
    (socket as Duplex & { setNoDelay?: (noDelay: boolean) => unknown }).setNoDelay?.(true);
    this.input = new SessionInput(
      socket,
      {
        isClosed: () => this.closedWith !== undefined,
        owedAnswers: () => this.output.owedAnswers,
        spendBytes: (bytes) => this.budgets.spendBytes(bytes),
        fail: (error) => this.goAwayNow(error.wireCode, error.message, error),
        peerEnded: () => this.peerEnded(),
        socketClosed: () => this.socketClosed(),
      },
      (type, flags, id, payload) => this.frame(type, flags, id, payload),
    );
    socket.on('error', (err: Error) =>
      this.finish(new GateError(ErrorCodes.AGENT_STREAM_FAILED, `tunnel connection failed: ${err.message}`, { cause: err })),
    );
  }

  /**
   * Connection credit this side may spend on DATA now: the other side's grant (none before its
   * HELLO), or none while this side's own output waits in the socket past OUTPUT_HIGH_BYTES.
   */
  get sendCredit(): number {
    return this.connection.sendable;
  }

  /** What the other side said in its HELLO (its windows, its stream limit), once it came. */
  get peerLimits(): HelloPayload | undefined {
    return this.peerHello;
  }

  /**
   * The streams of this side's the other side takes at once: its HELLO's stream limit, or the
   * default (1000) until its HELLO came (docs/tunnel-framing.md, "Opening").
   */
  get streamLimit(): number {
    return this.peerHello?.maxStreams ?? DEFAULT_MAX_STREAMS;
  }

  /** The other side is admitted: the limits of `untilAdmitted` no longer apply. */
  admit(): void {
    this.budgets.admit();
  }

  /** Control answers queued and not written yet (a measure for tests; MAX_OWED_ANSWERS bounds it). */
  get owedAnswers(): number {
    return this.output.owedAnswers;
  }

  /** True once the session can open no more streams (GOAWAY either way, out of ids, or closed). */
  get closing(): boolean {
    return this.goingAway || this.peerGoAway !== undefined || this.closedWith !== undefined || !this.table.idsLeft;
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

  /** Streams open now, both ways. */
  get openStreams(): number {
    return this.table.size;
  }

  /**
   * Opens a stream; bytes may be written to it at once, before the answer ('response'), and are
   * held by the other side until it has dialled. GATE_ERR_AGENT_STREAM_FAILED when the session
   * takes no new streams; GATE_ERR_AGENT_BUSY, with nothing sent, when this side's streams already
   * reach the other side's limit (`streamLimit`), which would refuse the open and count it as
   * abuse. The open that takes this side's last id also sends GOAWAY (NO_ERROR): the session
   * finishes its streams and ends, and its owner opens a new one.
   */
  open(open: OpenPayload): FramedStream {
    if (this.closing) {
      const why = this.peerGoAway
        ? `the other side sent GOAWAY (${wireErrorName(this.peerGoAway.code)})`
        : this.table.idsLeft
          ? 'the session is closing'
          : 'stream ids exhausted';
      throw new GateError(ErrorCodes.AGENT_STREAM_FAILED, `no new streams: ${why}`);
    }
    if (this.table.ownStreams >= this.streamLimit)
      throw new GateError(ErrorCodes.AGENT_BUSY, `no new streams: the other side takes ${this.streamLimit} at once`);
    // Encoded first: a target it refuses (GATE_ERR_INVALID_ARGUMENT) leaves no stream behind.
    const payload = encodeOpen(open);
    const id = this.table.takeId()!;
    const stream = new FramedStream(this, id, this.streamWindow, true, this.peerHello?.streamWindow ?? 0);
    this.table.add(stream);
    this.output.queue(controlFrame(FrameType.OPEN, 0, id, payload));
    if (!this.table.idsLeft) this.goAway(WireError.NO_ERROR, 'stream ids exhausted');
    return stream;
  }

  /**
   * Sends a PING; `done` gets the round trip in milliseconds, or the error that ended the session
   * (at once when it is over already). Nothing is thrown and nothing returned: a PING is always
   * sent on a live session, and how many are outstanding is the caller's to bound.
   */
  ping(done: PingDone): void {
    if (this.closedWith) return done(new GateError(ErrorCodes.AGENT_HEARTBEAT_TIMEOUT, 'the session is closed'), 0);
    this.output.queue(controlFrame(FrameType.PING, 0, 0, this.pings.send(done)));
  }

  /**
   * No new streams, either way: the other side is told with GOAWAY (`code`, `reason`); the streams
   * open now finish, then the connection ends.
   */
  goAway(code: number = WireError.NO_ERROR, reason = ''): void {
    if (this.goingAway || this.closedWith) return;
    this.goingAway = true;
    this.output.queue(controlFrame(FrameType.GOAWAY, 0, 0, encodeGoAway({ lastStreamId: this.table.lastPeerId, code, reason })));
    this.endIfIdle();
  }

  /** Ends every stream and the connection now; `error` is the session's ('close'). */
  destroy(error?: GateError): void {
    this.finish(error);
    this.socket.destroy();
  }

  /** Writes what this turn queued now (tests, and a GOAWAY that must leave before the FIN). */
  flush(): void {
    this.output.flush();
  }

  // --- StreamSession: what the streams ask of it ---

  sendData(stream: FramedStream, payload: Buffer | undefined, end: boolean, written?: () => void): void {
    const length = payload?.length ?? 0;
    this.connection.spend(length);
    if (end && !stream.opened) this.table.peerFin(stream);
    this.output.queue(frameHeader(FrameType.DATA, end ? FLAG_END : 0, stream.id, length));
    if (payload) this.output.queue(payload);
    if (written) this.output.afterWrite(written);
  }

  sendWindow(id: number, increment: number): void {
    // Owed: the other side's DATA asked for it (how many is bounded by the credit, not a flood).
    this.output.owe();
    this.output.queue(controlFrame(FrameType.WINDOW, 0, id, encodeWindow(increment)));
  }

  sendReset(id: number, code: number, reason: string): void {
    this.output.queue(controlFrame(FrameType.RESET, 0, id, encodeReset({ code, reason })));
  }

  sendAnswer(id: number, answer: AnswerPayload): void {
    this.output.queue(controlFrame(FrameType.ANSWER, 0, id, encodeAnswer(answer)));
  }

  consumed(bytes: number): void {
    if (this.closedWith) return;
    const increment = this.connection.consumed(bytes);
    if (increment > 0) this.sendWindow(0, increment);
  }

  waitForCredit(stream: FramedStream): void {
    this.connection.wait(stream);
  }

  forget(stream: FramedStream): void {
    if (!this.table.remove(stream)) return;
    this.connection.forget(stream);
    this.endIfIdle();
  }

  /** The socket closed: the session is over, if it was not already; 'close' told if it waited for this. */
  private socketClosed(): void {
    this.finish(this.ended ? undefined : new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'tunnel connection closed'));
    if (this.closeDeferred) this.tellClose();
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
    const goAway = controlFrame(FrameType.GOAWAY, 0, 0, encodeGoAway({ lastStreamId: this.table.lastPeerId, code, reason }));
    // 'close' told only once the socket has closed: a listener that destroys the socket at 'close'
    // would otherwise drop the GOAWAY unsent.
    if (this.output.endWith(goAway, !this.input.paused, graceMs)) this.closeDeferred = true;
    this.ended = true;
    this.finish(error);
  }

  // --- the other side's frames ---

  private frame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.closedWith) return;
    if (!this.peerHello) return this.hello(type, id, payload);
    dispatchPeerFrame(this.peerFrames, type, flags, id, payload);
  }

  /**
   * The other side's first frame, which must be its HELLO: from now on this side may send what it
   * allows, and the streams opened meanwhile get their credit.
   */
  private hello(type: number, id: number, payload: Buffer): void {
    if (type !== FrameType.HELLO || id !== 0)
      throw new FrameError(WireError.PROTOCOL_ERROR, `a frame of type ${type} on stream ${id} before the HELLO`);
    const hello = decodeHello(payload);
    this.peerHello = hello;
    this.connection.granted(hello.connectionWindow);
    this.minIncrement = minUsefulIncrement(hello.streamWindow);
    for (const stream of this.table.values()) stream.receiveWindow(hello.streamWindow);
    this.connection.wake();
    this.emit('hello', hello);
  }

  private data(id: number, flags: number, payload: Buffer): void {
    this.connection.received(payload.length);
    // An empty frame that is not a FIN carries nothing (a piece of a longer frame is never empty).
    if (payload.length === 0 && (flags & FLAG_END) === 0) this.budgets.spendIdle('empty DATA frames');
    const stream = this.table.lookup(id, 'DATA');
    if (!stream) {
      // A stream closed meanwhile (reset, refused): its bytes still count, and give their credit back.
      this.consumed(payload.length);
      return;
    }
    if (stream.opened && !stream.answer) throw new FrameError(WireError.PROTOCOL_ERROR, `DATA on stream ${id} before its ANSWER`);
    if (stream.finReceived) throw new FrameError(WireError.STREAM_CLOSED, `DATA on stream ${id} after its FIN`);
    const end = (flags & FLAG_END) !== 0;
    if (end && !stream.opened) this.table.peerFin(stream);
    if (!stream.receiveData(payload, end)) throw new FrameError(WireError.FLOW_CONTROL_ERROR, `DATA past stream ${id}'s credit`);
  }

  private window(id: number, increment: number): void {
    if (increment < this.minIncrement) this.budgets.spendIdle('WINDOW increments too small to be useful');
    if (id === 0) return this.connection.added(increment);
    const stream = this.table.lookup(id, 'WINDOW');
    if (stream && !stream.receiveWindow(increment)) throw new FrameError(WireError.FLOW_CONTROL_ERROR, `stream ${id}'s credit past 2^31-1`);
  }

  private peerOpen(id: number, payload: Buffer): void {
    this.table.takePeerId(id);
    const open = decodeForStream(decodeOpen, payload);
    const { goingAway, maxConcurrent: limit } = this;
    const state = { admitting: this.budgets.admitting, goingAway, held: this.table.peerStreams, limit, takes: !!this.options.onOpen };
    const verdict = judgeOpen(open, state);
    if ('take' in verdict) {
      const stream = new FramedStream(this, id, this.streamWindow, false, this.peerHello!.streamWindow);
      this.table.add(stream);
      return this.options.onOpen!(stream, verdict.take);
    }
    if (verdict.spends) this.budgets.spendReset();
    // Owed, as answers never read are bounded too (SessionOutput.oweOrCut).
    this.output.oweOrCut();
    if ('answer' in verdict) this.sendAnswer(id, verdict.answer);
    else this.sendReset(id, verdict.code, verdict.reason);
  }

  private answered(id: number, payload: Buffer): void {
    const stream = this.table.lookup(id, 'ANSWER');
    if (!stream) return;
    // An ANSWER the stream cannot take breaks the session's state, a session error as RFC 9113 §5.1
    // makes a frame in the wrong state; a malformed content is bad for that stream alone (RESET).
    if (!stream.opened || stream.answer)
      throw new FrameError(WireError.PROTOCOL_ERROR, `an ANSWER for stream ${id}, which it cannot answer`);
    const answer = decodeForStream(decodeAnswer, payload);
    if (answer instanceof StreamFrameError) return stream.reset(answer.wireCode, answer.message);
    stream.receiveAnswer(answer);
  }

  private peerReset(id: number, reset: ResetPayload): void {
    const stream = this.table.lookup(id, 'RESET');
    if (!stream) return;
    // Only a stream reset before this side answered it: see FloodBudgets.spendReset.
    if (!stream.opened && !stream.answered) this.budgets.spendReset();
    stream.receiveReset(reset.code, reset.reason);
  }

  private pinged(ack: boolean, payload: Buffer): void {
    if (!ack) {
      this.budgets.spendPing();
      this.output.oweOrCut();
      this.output.queue(controlFrame(FrameType.PING, FLAG_ACK, 0, payload));
      return;
    }
    if (!this.pings.answered(payload)) this.budgets.spendIdle('PING ACKs for no PING');
  }

  private peerGoingAway(goAway: GoAwayPayload): void {
    if (this.peerGoAway) return;
    this.peerGoAway = goAway;
    // Streams of ours the other side never saw: refused, so their opener may try elsewhere.
    for (const stream of this.table.values()) {
      if (stream.opened && stream.id > goAway.lastStreamId) stream.close(WireError.REFUSED_STREAM, `GOAWAY: ${goAway.reason}`, true);
    }
    this.emit('goaway', goAway);
    this.endIfIdle();
  }

  /** Once no stream is left after a GOAWAY (either way), this side ends the connection. */
  private endIfIdle(): void {
    if (this.table.size > 0 || this.ended || this.closedWith || !(this.goingAway || this.peerGoAway)) return;
    this.ended = true;
    setImmediate(() => {
      this.output.flush();
      this.socket.end();
    });
  }

  /** The other side's FIN: after a GOAWAY with no stream left it is the end; before, a lost session. */
  private peerEnded(): void {
    if (this.table.size === 0 && (this.goingAway || this.peerGoAway)) {
      this.ended = true;
      this.output.flush();
      if (!this.socket.writableEnded) this.socket.end();
      return;
    }
    this.destroy(new GateError(ErrorCodes.AGENT_STREAM_FAILED, 'the other side closed the tunnel connection'));
  }

  /** The session is over: every stream closed, every ping answered with the error. Once. */
  private finish(error: GateError | undefined): void {
    if (this.closedWith) return;
    this.closedWith = { error };
    this.output.sessionEnded();
    this.input.sessionEnded();
    const why = error?.message ?? 'the session closed';
    for (const stream of this.table.values()) stream.close(WireError.CANCEL, why, true);
    this.pings.failAll(error);
    this.connection.clear();
    if (!this.closeDeferred) this.tellClose();
  }

  /** 'close', once: at finish, or after goAwayNow once the socket has closed. */
  private tellClose(): void {
    if (this.closeTold) return;
    this.closeTold = true;
    this.emit('close', this.closedWith?.error);
  }
}
