// One stream of a framed tunnel session (framed-session.ts): a client connection's bytes both
// ways, with its own credit, its own FIN each way, and a reset with a reason.
import { EventEmitter } from 'node:events';
import { MAX_FRAME_PAYLOAD, WireError, type AnswerPayload } from './frames.js';
import { HeldPieces } from './held-pieces.js';

/** What a stream needs of its session: the sending of frames and the connection's credit. */
export interface StreamSession {
  /** Connection credit this side may still spend on DATA. */
  readonly sendCredit: number;
  /**
   * Sends DATA for stream `id` (its credit already taken); an empty payload with `end` is the FIN.
   * `written`, when given, runs once the session no longer holds `payload`: its socket write
   * completed, or the session dropped it.
   */
  sendData(stream: FramedStream, payload: Buffer | undefined, end: boolean, written?: () => void): void;
  sendWindow(id: number, increment: number): void;
  sendReset(id: number, code: number, reason: string): void;
  sendAnswer(id: number, answer: AnswerPayload): void;
  /** `bytes` of the connection's credit were consumed (delivered or dropped): returned in time. */
  consumed(bytes: number): void;
  /** The stream waits for connection credit: it is told with `creditArrived` when some comes. */
  waitForCredit(stream: FramedStream): void;
  /** The stream has closed: it takes no more frames. */
  forget(stream: FramedStream): void;
}

/** A write that waits for credit, and who to tell once it is written. */
interface QueuedWrite {
  data: Buffer;
  written: (() => void) | undefined;
}

/**
 * A stream, as the relays at each end use it: `write` (false: wait for 'drain'), `end` (the FIN),
 * `pause`/`resume` (a paused stream holds what arrives, within its credit, and returns no credit
 * until it is read), `reset`. Events: 'response' (the answer to an open this side made), 'data',
 * 'end' (the other side's FIN), 'drain', 'close' (both ways ended, or reset: see `closeCode`).
 *
 * A stream starts paused: what arrives before its reader is ready (the client's first bytes,
 * sent with the open) is held, not lost. No Duplex: a relay between a socket's handle and a
 * stream needs none of Node's stream machinery per connection.
 *
 * Events are emitted as frames arrive or as calls are made, not deferred as a Duplex defers
 * them: `end()` or `reset()` can emit 'close' before they return. Listen before calling.
 * (`resume()` is the exception: what it releases comes in a microtask.)
 */
export class FramedStream extends EventEmitter {
  /** Undefined while open or after a clean close (both FINs); else the wire code it was reset with. */
  closeCode: number | undefined = undefined;
  closeReason = '';
  /** True when the other side reset (or refused) it, false when this side did. */
  closedByPeer = false;
  /** The answer to an open this side made, once it came. */
  answer: AnswerPayload | undefined = undefined;
  closed = false;
  /** Bytes this side may still send on this stream before credit comes back. */
  private credit: number;
  /** Bytes the other side may still send before this side returns credit. */
  private allowance: number;
  /** Bytes read by the consumer and not yet returned as credit. */
  private unreturned = 0;
  /** Writes waiting for credit (or for the answer), each with its `written` callback. */
  private queued: QueuedWrite[] | undefined = undefined;
  private endQueued = false;
  private sentEnd = false;
  private gotEnd = false;
  private endDelivered = false;
  private flowing = false;
  /** This side answered the other side's open. */
  private responded = false;
  private delivering = false;
  /** What arrived while paused: small pieces gathered, so its objects are bounded, not only its bytes. */
  private readonly held = new HeldPieces();

  constructor(
    private readonly session: StreamSession,
    readonly id: number,
    /** The window this side gives the other side on this stream (told in its HELLO). */
    private readonly window: number,
    /** True for a stream this side opened: it waits for an answer before the other side's DATA. */
    readonly opened: boolean,
    /** The window the other side gives this side: its HELLO's, or 0 until that has come. */
    sendWindow: number = window,
  ) {
    super();
    this.credit = sendWindow;
    this.allowance = window;
  }

  /**
   * Sends what the credit allows now; the rest waits for credit. False: wait for 'drain'. On a
   * stream the other side opened, bytes written before `respond` wait for it (DATA before the
   * ANSWER would break the framing).
   *
   * `data` is held, not copied, until it is written to the session's socket. `written`, when
   * given, runs once it no longer is (written, or dropped because the stream or the session
   * closed): a relay that writes a view of a read buffer it reuses reads again only then.
   */
  write(data: Buffer, written?: () => void): boolean {
    if (this.closed || this.sentEnd || this.endQueued) {
      if (written) queueMicrotask(written);
      return false;
    }
    if (this.queued || !this.answered) {
      this.enqueue(data, written);
      return false;
    }
    const sent = this.send(data, written);
    if (sent === data.length) return true;
    this.enqueue(sent === 0 ? data : data.subarray(sent), written);
    return false;
  }

  /** This side's FIN, after whatever is queued. */
  end(): void {
    if (this.closed || this.sentEnd || this.endQueued) return;
    if (this.queued || !this.answered) {
      this.queued ??= [];
      this.endQueued = true;
      return;
    }
    this.sentEnd = true;
    this.session.sendData(this, undefined, true);
    this.closeIfDone();
  }

  pause(): void {
    this.flowing = false;
  }

  /** Starts delivery; what is held comes in a microtask, after the caller's own listeners are on. */
  resume(): void {
    if (this.flowing) return;
    this.flowing = true;
    if (this.held.bytes > 0 || this.gotEnd) queueMicrotask(() => this.deliverHeld());
  }

  /** Objects held unread (a measure for tests: bounded whatever the frames' sizes). */
  get heldPieces(): number {
    return this.held.count;
  }

  get isPaused(): boolean {
    return !this.flowing;
  }

  /** The same as `closed`, under a socket's name (lib/transport/dial-then-relay.ts holds either). */
  get destroyed(): boolean {
    return this.closed;
  }

  /**
   * Takes what the stream holds unread, as a read would (its credit goes back in time), or
   * undefined when it holds nothing: a holder hands an opener's first bytes on with its own open.
   * The FIN, if it came, is still delivered at `resume`.
   */
  takeHeld(): Buffer | undefined {
    if (this.held.bytes === 0 || this.closed) return undefined;
    const bytes = this.held.bytes;
    const held = this.held.takeAll();
    this.account(bytes);
    return held;
  }

  /** Ends the stream both ways now, telling the other side `code` and `reason`. */
  reset(code: number = WireError.CANCEL, reason = ''): void {
    if (this.closed) return;
    this.session.sendReset(this.id, code, reason);
    this.close(code, reason, false);
  }

  /** Answers an open of the other side: 200 opens the stream, anything else refuses (and closes) it. */
  respond(answer: AnswerPayload): void {
    if (this.closed || this.answered) return;
    this.responded = true;
    this.session.sendAnswer(this.id, answer);
    if (answer.status !== 200) return this.close(WireError.REFUSED_STREAM, answer.reason, false);
    this.creditArrived(); // what was written before the answer
  }

  /**
   * May DATA go out: always on a stream this side opened, after `respond` on one the other side
   * did. On the other side's stream: this side has answered it (its dial is done, or refused).
   */
  get answered(): boolean {
    return this.opened || this.responded;
  }

  // --- from the session ---

  /** DATA for this stream; false when it exceeds the credit the other side was given. */
  receiveData(payload: Buffer, end: boolean): boolean {
    if (payload.length > this.allowance) return false;
    this.allowance -= payload.length;
    if (this.closed) {
      this.session.consumed(payload.length);
      return true;
    }
    if (payload.length > 0) {
      if (this.flowing && this.held.bytes === 0) this.deliver(payload);
      // A payload is a view of the socket read it came in: a small one is copied (into a tail
      // shared with its neighbours), or a few bytes held from each of many reads would keep every
      // read's whole buffer alive, and many tiny frames would be as many objects. One that is
      // large and most of its read (bulk, while the reader is behind) is held as it is.
      else this.held.add(payload);
    }
    if (end) {
      this.gotEnd = true;
      if (this.flowing && this.held.bytes === 0) this.deliverEnd();
    }
    return true;
  }

  /** True when the other side already sent its FIN (DATA after it breaks the framing). */
  get finReceived(): boolean {
    return this.gotEnd;
  }

  receiveWindow(increment: number): boolean {
    if (this.credit + increment > 0x7fffffff) return false;
    this.credit += increment;
    this.creditArrived();
    return true;
  }

  receiveAnswer(answer: AnswerPayload): void {
    this.answer = answer;
    this.emit('response', answer);
    if (answer.status !== 200) this.close(WireError.REFUSED_STREAM, answer.reason, true);
  }

  receiveReset(code: number, reason: string): void {
    this.close(code, reason, true);
  }

  /** Credit came (the stream's or the connection's): what is queued goes now, as far as it can. */
  creditArrived(): void {
    const queued = this.queued;
    if (!queued || this.closed || !this.answered) return;
    while (queued.length > 0) {
      const next = queued[0]!;
      const sent = this.send(next.data, next.written);
      if (sent < next.data.length) {
        next.data = next.data.subarray(sent);
        return;
      }
      queued.shift();
    }
    this.queued = undefined;
    if (this.endQueued) {
      this.endQueued = false;
      this.end();
    } else this.emit('drain');
  }

  /** Closes the stream (reset, refused, or the session gone) without telling the other side. */
  close(code: number | undefined, reason: string, byPeer: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.closeCode = code;
    this.closeReason = reason;
    this.closedByPeer = byPeer;
    // What was queued is dropped: its writers may reuse their buffers.
    const dropped = this.queued;
    this.queued = undefined;
    if (dropped) for (const { written } of dropped) if (written) queueMicrotask(written);
    // What was held unread gives its connection credit back: the other side may use it elsewhere.
    if (this.held.bytes > 0) this.session.consumed(this.held.bytes);
    this.held.clear();
    this.session.forget(this);
    this.emit('close');
  }

  // --- inside ---

  private enqueue(data: Buffer, written: (() => void) | undefined): void {
    (this.queued ??= []).push({ data, written });
  }

  /**
   * Sends as much of `data` as the stream's and the connection's credit allow; returns how much.
   * `written` goes with the frame that sends its last byte.
   */
  private send(data: Buffer, written?: () => void): number {
    let at = 0;
    while (at < data.length) {
      const n = Math.min(data.length - at, this.credit, this.session.sendCredit, MAX_FRAME_PAYLOAD);
      if (n <= 0) break;
      this.credit -= n;
      at += n;
      const whole = at === n && n === data.length;
      this.session.sendData(this, whole ? data : data.subarray(at - n, at), false, at === data.length ? written : undefined);
    }
    // Blocked by the connection, not the stream: the session says when its credit comes.
    if (at < data.length && this.credit > 0) this.session.waitForCredit(this);
    return at;
  }

  private deliver(payload: Buffer): void {
    this.emit('data', payload);
    this.account(payload.length);
  }

  /** `bytes` were read: their credit goes back in time. */
  private account(bytes: number): void {
    this.unreturned += bytes;
    this.session.consumed(bytes);
    // Credit goes back once half the window is read, as nghttp2 does: one WINDOW per half window.
    if (this.unreturned >= this.window / 2 && !this.closed && !this.gotEnd) {
      this.allowance += this.unreturned;
      this.session.sendWindow(this.id, this.unreturned);
      this.unreturned = 0;
    }
  }

  private deliverHeld(): void {
    if (this.delivering) return;
    this.delivering = true;
    while (this.flowing && this.held.bytes > 0 && !this.closed) this.deliver(this.held.shift()!);
    this.delivering = false;
    if (this.flowing && this.held.bytes === 0 && this.gotEnd) this.deliverEnd();
  }

  private deliverEnd(): void {
    if (this.endDelivered || this.closed) return;
    this.endDelivered = true;
    this.emit('end');
    this.closeIfDone();
  }

  private closeIfDone(): void {
    if (this.sentEnd && this.endDelivered) this.close(undefined, '', false);
  }
}
