// A framed session's connection-level flow control (docs/tunnel-framing.md, "Flow control"): the
// credit the other side gave this side to send, the bytes it may still send here, the credit owed
// back as the readers take bytes, and the streams waiting for credit. Bookkeeping only:
// framed-session.ts sends the WINDOWs and the DATA.
import type { FramedStream } from './framed-stream.js';
import { FrameError, WireError } from './frames.js';

/** The highest credit either way (RFC 9113 §6.9.1's bound, kept by the framing). */
const MAX_CREDIT = 0x7fffffff;

export class ConnectionCredit {
  /** Credit the other side gave, not yet spent (none before its HELLO). */
  private credit = 0;
  /** Bytes the other side may still send on the connection. */
  private allowance: number;
  /** Bytes read here whose credit has not been returned yet. */
  private unreturned = 0;
  private readonly waiting = new Set<FramedStream>();

  constructor(
    /** The connection window this side advertised in its HELLO. */
    private readonly window: number,
    /** True while this side's own output waits in the socket past its bound: send nothing more. */
    private readonly outputFull: () => boolean,
  ) {
    this.allowance = window;
  }

  /** What this side may spend on DATA now: none while its own output is full. */
  get sendable(): number {
    return this.outputFull() ? 0 : this.credit;
  }

  /** The other side's HELLO: its connection window is this side's first credit (then `wake`). */
  granted(connectionWindow: number): void {
    this.credit = connectionWindow;
  }

  /** A connection WINDOW from the other side; past 2^31-1 it breaks the framing. */
  added(increment: number): void {
    if (this.credit + increment > MAX_CREDIT) throw new FrameError(WireError.FLOW_CONTROL_ERROR, 'connection credit past 2^31-1');
    this.credit += increment;
    this.wake();
  }

  /** This side sends `bytes` of DATA. */
  spend(bytes: number): void {
    this.credit -= bytes;
  }

  /** The other side sent `bytes` of DATA: past what it was allowed, it breaks the framing. */
  received(bytes: number): void {
    if (bytes > this.allowance)
      throw new FrameError(WireError.FLOW_CONTROL_ERROR, `DATA past the connection's credit (${bytes} bytes, ${this.allowance} left)`);
    this.allowance -= bytes;
  }

  /**
   * Readers took `bytes` (or a closed stream dropped them): the increment to return to the other
   * side now, once half the window is owed, or 0 while less is.
   */
  consumed(bytes: number): number {
    this.unreturned += bytes;
    if (this.unreturned < this.window / 2) return 0;
    const increment = this.unreturned;
    this.allowance += increment;
    this.unreturned = 0;
    return increment;
  }

  /** `stream` has bytes to send and no credit: it is told (creditArrived) when some comes. */
  wait(stream: FramedStream): void {
    this.waiting.add(stream);
  }

  forget(stream: FramedStream): void {
    this.waiting.delete(stream);
  }

  /** Tells the waiting streams, in turn, while credit lasts (the output drained, or credit came). */
  wake(): void {
    for (const stream of this.waiting) {
      if (this.sendable <= 0) break;
      this.waiting.delete(stream);
      stream.creditArrived();
    }
  }

  clear(): void {
    this.waiting.clear();
  }
}
