const CHECKS_PER_TIMEOUT = 4;

interface Watched {
  reads: number;
  quietChecks: number;
  onIdle: () => void;
}

/**
 * Idle timeouts for relays on bare handles, which have no socket.setTimeout: one interval for
 * all of them checks, four times per timeout, whether each relay has read anything since the
 * last check. A relay is reported idle after between 1 and 1.25 timeouts without a read. The
 * interval runs only while something is watched.
 */
export class IdleSweep<T extends { readonly reads: number }> {
  private readonly watched = new Map<T, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private readonly checkMs: number;

  constructor(timeoutMs: number) {
    this.checkMs = Math.max(1, Math.ceil(timeoutMs / CHECKS_PER_TIMEOUT));
  }

  add(item: T, onIdle: () => void): void {
    this.watched.set(item, { reads: item.reads, quietChecks: 0, onIdle });
    if (!this.timer) this.timer = setInterval(() => this.check(), this.checkMs);
  }

  delete(item: T): void {
    this.watched.delete(item);
    if (this.watched.size === 0) this.stop();
  }

  private check(): void {
    for (const [item, entry] of this.watched) {
      if (item.reads !== entry.reads) {
        entry.reads = item.reads;
        entry.quietChecks = 0;
      } else if (++entry.quietChecks >= CHECKS_PER_TIMEOUT) {
        this.watched.delete(item);
        entry.onIdle();
      }
    }
    if (this.watched.size === 0) this.stop();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
