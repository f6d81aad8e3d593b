/** How long to wait before reconnecting: exponential growth, capped, with full jitter. */
export interface BackoffOptions {
  /** Ceiling of the first wait (attempt 0), in milliseconds. */
  initialMs: number;
  /** The ceiling never grows past this. */
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000 };

/**
 * Milliseconds to wait before reconnect attempt `attempt` (0-based): uniform in
 * [0, min(maxMs, initialMs * 2^attempt)). "Full jitter" (AWS Architecture Blog, "Exponential
 * Backoff and Jitter", 2015): after a proxy restart every agent reconnects at once, and spreading
 * the whole interval, not just a slice of it, is what keeps them from arriving in waves. Pure:
 * `random` returns [0, 1).
 */
export function backoffDelay(attempt: number, options: BackoffOptions = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(0, Math.floor(attempt)), 52); // 2^52 already dwarfs any cap
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** exponent);
  return Math.floor(random() * ceiling);
}
