import type { GateError } from './errors.js';

/**
 * One lifecycle for every long-lived part that owns sockets or timers (listeners, servers, pools,
 * tunnels, stores): `close({graceMs})` finishes (stops taking new work, lets work in flight end
 * within `graceMs`, then destroys what is left; resolves once everything is released; a second
 * call returns the same promise), `destroy(err)` stops now (synchronous, releases every socket
 * and timer, idempotent). A part with nothing to drain has both: its close resolves at once.
 */
export type LifecycleState = 'open' | 'closing' | 'closed';

/** The state of a part that is dialled before it is usable (an agent's tunnel). */
export type ConnectionState = 'connecting' | LifecycleState;

export interface CloseOptions {
  /** How long work in flight may take to finish before what is left is destroyed; unset: the part's own default. */
  graceMs?: number;
}

/** What every such part has (`implements Closable` lets the compiler hold each to it). */
export interface Closable {
  /** LifecycleState; an agent's tunnel starts 'connecting'. */
  readonly state: ConnectionState;
  close(options?: CloseOptions): Promise<void>;
  destroy(err?: GateError): void;
}

/**
 * The bookkeeping each part would otherwise repeat: the state, and the one promise every close()
 * returns. The part keeps its own teardown; this only makes close idempotent and destroy final.
 */
export class Lifecycle {
  #state: LifecycleState = 'open';
  #closing: Promise<void> | undefined;
  #released = false;

  get state(): LifecycleState {
    return this.#state;
  }

  /** Whether close() or destroy() has been called. */
  get ending(): boolean {
    return this.#state === 'closing' || this.#state === 'closed';
  }

  /**
   * Runs `finish` (synchronously up to its first await) on the first call and returns its promise,
   * which ends in 'closed' whether it resolves or rejects; every later call, and a call after
   * destroy(), returns the same promise without running `finish` again.
   */
  close(finish: () => Promise<void>): Promise<void> {
    if (this.#closing) return this.#closing;
    if (this.#released) return (this.#closing = Promise.resolve());
    this.#state = 'closing';
    this.#closing = (async () => {
      try {
        await finish();
      } finally {
        this.#state = 'closed';
        this.#released = true;
      }
    })();
    return this.#closing;
  }

  /** True the first time, while something may still be held (the caller then releases it all now). */
  destroy(): boolean {
    if (this.#released) return false;
    this.#released = true;
    this.#state = 'closed';
    return true;
  }
}

/** Resolves on the emitter's 'close' (a session, socket or server that has not closed yet). */
export function closeEvent(emitter: { once(event: 'close', listener: () => void): unknown }): Promise<void> {
  return new Promise((resolve) => emitter.once('close', () => resolve()));
}

/** Waits for `work`, but no longer than `ms`: the grace a close gives work in flight. */
export async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * The close of a part that holds HTTP/2 sessions: with a `graceMs`, GOAWAY first (`goAway`) and
 * that long for their open streams; then `endAll` destroys what is left. Resolves once every
 * session held when it began has closed.
 */
export async function closeSessions(
  sessions: Iterable<{ once(event: 'close', listener: () => void): unknown }>,
  options: CloseOptions,
  how: { goAway: () => void; endAll: () => void },
): Promise<void> {
  const held = [...sessions];
  const gone = Promise.all(held.map((session) => closeEvent(session)));
  if (options.graceMs !== undefined && options.graceMs > 0 && held.length > 0) {
    how.goAway();
    await within(gone, options.graceMs);
  }
  how.endAll();
  await gone;
}
