// What a session's other side may make it do, counted: frames that carry nothing, streams reset
// before their answer (rapid reset), and everything before admission. Pure counting: the session
// (framed-session.ts) ends itself with the FrameError a spent budget throws. The protocol's page
// (docs/tunnel-framing.md, "Limits") gives the numbers and why.
import { FrameError, floodError, WireError } from './frames.js';

/**
 * Frames that carry nothing a burst may hold, and how many come back per second: DATA with no
 * payload and no END (CVE-2019-9518), a WINDOW of less than a useful increment (CVE-2019-9511: a
 * peer returning credit a byte at a time makes a frame of work per byte), a PING ACK for no PING
 * of ours, a frame of a type this version does not know. Past it: ENHANCE_YOUR_CALM. Node's http2
 * counts the empty frames as invalid ones (maxSessionInvalidFrames, 1000).
 */
export const IDLE_FRAME_BURST = 1000;
export const IDLE_FRAMES_PER_SECOND = 100;

/** A WINDOW increment below this (or an eighth of the stream window it refills, if less) is an idle frame. */
const MIN_USEFUL_INCREMENT = 1024;

/** What a session's other side may do before it is admitted. */
export interface AdmissionLimits {
  /** PINGs answered (an agent sends one at start, then one per heartbeat interval). */
  pings: number;
  /** Bytes read from the connection, all frames counted. */
  bytes: number;
  /** Frames that carry nothing (see IDLE_FRAME_BURST), with no refill. */
  idleFrames: number;
}

/** The smallest WINDOW increment that is not an idle frame, for the other side's stream window. */
export function minUsefulIncrement(peerStreamWindow: number): number {
  return Math.min(MIN_USEFUL_INCREMENT, Math.floor(peerStreamWindow / 8));
}

/** A session's budgets against its other side. Each `spend` throws a FrameError once its budget is gone. */
export class FloodBudgets {
  private idleTokens = IDLE_FRAME_BURST;
  private idleRefilledAt = Date.now();
  private resetTokens: number;
  private resetRefilledAt = Date.now();
  /** Until `admit()`: what the other side may still do (AdmissionLimits), counted down. */
  private admission: AdmissionLimits | undefined;

  constructor(
    private readonly resetBurst: number,
    private readonly resetsPerSecond: number,
    untilAdmitted: AdmissionLimits | undefined,
  ) {
    this.resetTokens = resetBurst;
    this.admission = untilAdmitted && { ...untilAdmitted };
  }

  /** True until `admit()`, when the session was given admission limits. */
  get admitting(): boolean {
    return this.admission !== undefined;
  }

  /** The other side is admitted: the admission limits no longer apply. */
  admit(): void {
    this.admission = undefined;
  }

  /** Bytes read from the connection: before admission, counted against its bound. */
  spendBytes(bytes: number): void {
    if (!this.admission) return;
    this.admission.bytes -= bytes;
    if (this.admission.bytes < 0) throw floodError('more bytes than a session may send before it is admitted');
  }

  /** A PING to answer: before admission, counted against its bound. */
  spendPing(): void {
    if (this.admission && --this.admission.pings < 0) throw floodError('more PINGs than a session may send before it is admitted');
  }

  /** One frame that carries nothing: past the budget (IDLE_FRAME_BURST, or admission's), the session ends. */
  spendIdle(what: string): void {
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
  spendReset(): void {
    const now = Date.now();
    this.resetTokens = Math.min(this.resetBurst, this.resetTokens + ((now - this.resetRefilledAt) / 1000) * this.resetsPerSecond);
    this.resetRefilledAt = now;
    if (this.resetTokens < 1) throw new FrameError(WireError.ENHANCE_YOUR_CALM, 'too many streams reset or refused (rapid reset)');
    this.resetTokens--;
  }
}
