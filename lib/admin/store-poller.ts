/**
 * What the proxy's watches of the cluster store share (the maintenance window, the rollout): read
 * the store now, then again `intervalMs` after each read ends — a timer per read, never an
 * interval, so a slow store never has two reads of one watch in flight — and keep what was read
 * last through an outage, logging only when the store turns unreadable and readable again (a
 * store down for an hour is two lines, not 3,600). Every proxy thus serves a change within one
 * interval, whether or not a message reached it, and the public endpoints answer from memory.
 */
import { ErrorCodes } from '../errors.js';
import { type Closable, type CloseOptions, Lifecycle, type LifecycleState } from '../lifecycle.js';
import type { Logger } from '../log.js';

export interface StorePollerOptions {
  intervalMs: number;
  /** One poll; the poller runs one at a time. */
  poll: () => Promise<void>;
  logger: Logger;
  /** What the log says when a read first fails, and when one succeeds after that. */
  unreadable: string;
  readableAgain: string;
  /** Run by close() once no poll is in flight (the rollout hands its lease over). */
  afterStop?: () => Promise<void>;
}

export class StorePoller implements Closable {
  private readonly lifecycle = new Lifecycle();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private storeDown = false;

  constructor(private readonly options: StorePollerOptions) {}

  /** Polls now and then every interval; resolves after the first poll. */
  async start(): Promise<void> {
    await this.poll();
    const tick = (): void => {
      if (this.lifecycle.ending) return;
      this.timer = setTimeout(() => void this.poll().finally(tick), this.options.intervalMs);
      this.timer.unref();
    };
    tick();
  }

  /** One poll now, or the one in flight. */
  poll(): Promise<void> {
    this.polling ??= this.options.poll().finally(() => (this.polling = undefined));
    return this.polling;
  }

  /**
   * `read()`'s value, or undefined when it failed: the caller keeps what it read last, since a
   * store outage must not take away what the proxy serves.
   */
  async readStore<T>(read: () => Promise<T>): Promise<{ value: T } | undefined> {
    try {
      const value = await read();
      if (this.storeDown) this.options.logger.info(this.options.readableAgain);
      this.storeDown = false;
      return { value };
    } catch (err) {
      if (!this.storeDown) this.options.logger.warn({ code: ErrorCodes.STORE_UNAVAILABLE, err }, this.options.unreadable);
      this.storeDown = true;
      return undefined;
    }
  }

  /** Whether close() or destroy() has been called. */
  get ending(): boolean {
    return this.lifecycle.ending;
  }

  get state(): LifecycleState {
    return this.lifecycle.state;
  }

  /** Stops polling, waits for the poll in flight, then runs `afterStop`. */
  close(_options: CloseOptions = {}): Promise<void> {
    return this.lifecycle.close(async () => {
      clearTimeout(this.timer);
      await this.polling;
      await this.options.afterStop?.();
    });
  }

  destroy(): void {
    if (this.lifecycle.destroy()) clearTimeout(this.timer);
  }
}
