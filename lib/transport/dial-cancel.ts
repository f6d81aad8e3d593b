/**
 * "The client left while we were dialling for it", told to whoever waits on the dial: a plain
 * flag and callbacks, with an `AbortSignal` made only for a dial that asks for one (`signal`).
 *
 * Why not an AbortController per dial: on Node 20 creating an AbortSignal and adding an 'abort'
 * listener costs about 5 µs (BENCHMARKS.md), paid twice per tunnelled connection (the front proxy
 * and the holder of a peered route) for a cancel that almost never happens. A stream opener
 * (lib/tunnel/framed-answer.ts) registers a callback here instead; dials that hand a signal on to
 * Node's own APIs (`net.connect`, the environment's proxies) still get a real one.
 */
export class DialCancel {
  private done = false;
  private why: unknown;
  // One waiter at a time is the rule (the opener waiting now); an array only for more.
  private listener: ((reason: unknown) => void) | undefined;
  private more: Array<(reason: unknown) => void> | undefined;
  private controller: AbortController | undefined;

  /**
   * `outside`, when given, is an abort of the caller's own (a listener closing cancels its pending
   * dials): aborting it cancels this, and this cancelling aborts it, as one.
   */
  constructor(outside?: AbortController) {
    if (!outside) return;
    this.controller = outside;
    const signal = outside.signal;
    if (signal.aborted) {
      this.done = true;
      this.why = signal.reason;
    } else signal.addEventListener('abort', () => this.cancel(signal.reason), { once: true });
  }

  /** Whether the dial has been cancelled. */
  get cancelled(): boolean {
    return this.done;
  }

  /** Why it was cancelled (undefined while it is not): only why it stopped, the dial reports its own error. */
  get reason(): unknown {
    return this.why;
  }

  /** A signal that aborts with this cancel, made on first use (for APIs that take one). */
  get signal(): AbortSignal {
    this.controller ??= new AbortController();
    if (this.done && !this.controller.signal.aborted) this.controller.abort(this.why);
    return this.controller.signal;
  }

  /** Calls `listener` once when cancelled (at once if it already is). */
  onCancel(listener: (reason: unknown) => void): void {
    if (this.done) return listener(this.why);
    if (this.listener === undefined) this.listener = listener;
    else (this.more ??= []).push(listener);
  }

  /** Forgets a listener the dial no longer needs (it finished). */
  offCancel(listener: (reason: unknown) => void): void {
    if (this.listener === listener) this.listener = undefined;
    else if (this.more) {
      const at = this.more.indexOf(listener);
      if (at >= 0) this.more.splice(at, 1);
    }
  }

  /** Cancels: tells every listener once, and aborts the signal if one was made. Later calls do nothing. */
  cancel(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason;
    if (this.controller && !this.controller.signal.aborted) this.controller.abort(reason);
    const { listener, more } = this;
    this.listener = undefined;
    this.more = undefined;
    listener?.(reason);
    if (more) for (const each of more) each(reason);
  }
}

/**
 * Calls `listener` once when `cancel` cancels: a DialCancel (no AbortSignal made for it) or a
 * caller's own AbortSignal; at once if it already has. `stopWaiting` forgets it. For the stream
 * openers' waits (lib/tunnel/framed-answer.ts), which take either; the
 * listener is registered as it is, so a wait allocates nothing here (`cancelReason` says why).
 */
export function whenCancelled(cancel: DialCancel | AbortSignal | undefined, listener: () => void): void {
  if (!cancel) return;
  if (cancel instanceof DialCancel) return cancel.onCancel(listener);
  if (cancel.aborted) return listener();
  cancel.addEventListener('abort', listener, { once: true });
}

/** Forgets a listener `whenCancelled` registered (the wait is over). */
export function stopWaiting(cancel: DialCancel | AbortSignal | undefined, listener: () => void): void {
  if (!cancel) return;
  if (cancel instanceof DialCancel) cancel.offCancel(listener);
  else cancel.removeEventListener('abort', listener);
}

/** Why `cancel` cancelled (undefined while it has not). */
export function cancelReason(cancel: DialCancel | AbortSignal | undefined): unknown {
  return cancel?.reason;
}
