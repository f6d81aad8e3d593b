import type { DialAddress } from './address-order.js';
import { closeHandle, connectTcp, type HandleOwner, type TcpHandle } from './uv.js';

/**
 * RFC 8305's Connection Attempt Delay: while an attempt runs, the next address of a name is tried
 * this long after it started (a failed attempt starts the next one at once). Node's own
 * net.connect uses the same Happy Eyeballs for the socket transport (autoSelectFamily).
 */
const ATTEMPT_DELAY_MS = 250;

/**
 * Connects a bare TCP handle (uv.ts) to the first of `addresses` that accepts, staggering the
 * attempts as above. `done` runs once: with the connected handle (the caller owns it), or with
 * the errno name of the failure: ECONNREFUSED if any address refused (the host is there, the
 * service is not), else the first failure. No deadline here: the caller has its own timer and
 * calls cancel() when it expires. `forward` on handles and the agent's dial of a target share it.
 */
export class TcpDial implements HandleOwner {
  /** Connects under way (several while a name's addresses are staggered). */
  private readonly attempts = new Set<TcpHandle>();
  /** Addresses not tried yet, in dialOrder. */
  private pending: DialAddress[] = [];
  private readonly errors: string[] = [];
  private nextAttempt: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly port: number,
    private readonly onDone: (outcome: TcpHandle | string) => void,
  ) {}

  connect(addresses: DialAddress[]): void {
    if (this.done) return;
    this.pending = addresses; // ours: shift() consumes it
    this.attemptNext();
  }

  /** Abandons every attempt; `done` is not called. */
  cancel(): void {
    if (this.done) return;
    this.finish();
  }

  /** Starts the next address's connect; schedules the one after while this one runs. */
  private attemptNext(): void {
    clearTimeout(this.nextAttempt);
    this.nextAttempt = undefined;
    for (let next = this.pending.shift(); next && !this.done; next = this.pending.shift()) {
      const handle = connectTcp(next.address, this.port, next.family, this);
      if (typeof handle === 'string') {
        this.errors.push(handle);
        continue;
      }
      this.attempts.add(handle);
      if (this.pending.length > 0) this.nextAttempt = setTimeout(() => this.attemptNext(), ATTEMPT_DELAY_MS);
      return;
    }
    if (this.attempts.size === 0 && !this.done) this.allFailed();
  }

  private allFailed(): void {
    const code = this.errors.includes('ECONNREFUSED') ? 'ECONNREFUSED' : (this.errors[0] ?? 'ENOTFOUND');
    this.finish();
    this.onDone(code);
  }

  onHandleConnect(handle: TcpHandle, error: string | undefined): void {
    if (this.done || !this.attempts.delete(handle)) return;
    if (error !== undefined) {
      closeHandle(handle);
      this.errors.push(error);
      // A failed attempt starts the next address at once (RFC 8305, section 5).
      if (this.pending.length > 0) this.attemptNext();
      else if (this.attempts.size === 0) this.allFailed();
      return;
    }
    // The first to connect wins; the others are abandoned.
    this.finish();
    this.onDone(handle);
  }

  // A dialing handle reads nothing: these never fire.
  onHandleData(): void {}
  onHandleEnd(): void {}

  private finish(): void {
    this.done = true;
    for (const other of this.attempts) closeHandle(other);
    this.attempts.clear();
    clearTimeout(this.nextAttempt);
    this.nextAttempt = undefined;
  }
}
