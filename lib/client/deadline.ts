import type { Socket } from 'node:net';

export interface DeadlineOptions<T> {
  timeoutMs: number;
  signal: AbortSignal | undefined;
  timeoutError: () => Error;
  abortError: (reason: unknown) => Error;
  /** Called with a result that arrived after the deadline fired, so it can be released. */
  discard: (late: T) => void;
}

/**
 * Runs one dial under one deadline and an optional AbortSignal. Every socket the work opens is
 * registered with `track`; on timeout or abort they are all destroyed (which makes the work fail,
 * its error then being ignored), the timer is cleared and the abort listener removed on every
 * path, so nothing is left behind whichever way the dial ends.
 */
export function withDeadline<T>(work: (track: (socket: Socket) => void) => Promise<T>, options: DeadlineOptions<T>): Promise<T> {
  const { signal } = options;
  if (signal?.aborted) return Promise.reject(options.abortError(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const sockets = new Set<Socket>();
    let settled = false;
    const settle = (): void => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const fail = (err: Error): void => {
      if (settled) return;
      settle();
      for (const socket of sockets) socket.destroy();
      reject(err);
    };
    const onAbort = (): void => fail(options.abortError(signal?.reason));
    const timer = setTimeout(() => fail(options.timeoutError()), options.timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    const track = (socket: Socket): void => {
      if (settled) socket.destroy();
      else sockets.add(socket);
    };
    work(track).then(
      (value) => {
        if (settled) {
          options.discard(value);
          return;
        }
        settle();
        resolve(value);
      },
      (err: unknown) => fail(err instanceof Error ? err : new Error(String(err))),
    );
  });
}
