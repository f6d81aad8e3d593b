/** What a heartbeat needs of a session (lib/tunnel-framing/framed-session.ts is one). */
export interface PingPeer {
  /** The session is over. */
  readonly closed: boolean;
  /** Sends a PING; `done` once it is answered, or with the error that ended the session (or why it could not be sent). */
  ping(done: (err: Error | null | undefined) => void): void;
  once(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}

export interface HeartbeatOptions {
  /** Milliseconds between PINGs. */
  intervalMs: number;
  /** Milliseconds a PING may go unanswered before the peer is declared dead. */
  timeoutMs: number;
  /** Called once when a PING is not answered in time (or cannot be sent). */
  onTimeout: (reason: string) => void;
}

export const DEFAULT_HEARTBEAT_INTERVAL_MS = 15_000;
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000;

/**
 * The framing's PING on an interval, from whichever side runs it. A tunnel crosses NATs and
 * corporate proxies that drop idle flows without a FIN; without a heartbeat a dead peer is
 * noticed only when the next stream hangs. The peer must answer each PING with an ACK, so an
 * answer proves the whole path (TCP, TLS, the peer's event loop) is alive. Returns a stop function;
 * the heartbeat also stops by itself when the session closes. Timers are unref'd: the tunnel's
 * socket, not its heartbeat, keeps a process alive.
 */
export function startHeartbeat(session: PingPeer, options: HeartbeatOptions): () => void {
  let deadline: NodeJS.Timeout | undefined;
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    clearInterval(interval);
    clearTimeout(deadline);
    session.removeListener('close', stop);
  };
  const fail = (reason: string): void => {
    if (stopped) return;
    stop();
    options.onTimeout(reason);
  };
  const beat = (): void => {
    if (stopped || deadline !== undefined) return; // one PING outstanding at a time
    if (session.closed) return stop();
    deadline = setTimeout(() => fail(`no PING answer within ${options.timeoutMs} ms`), options.timeoutMs);
    deadline.unref();
    // A framed session always sends its PING, or calls back at once with why it cannot.
    session.ping((err) => {
      clearTimeout(deadline);
      deadline = undefined;
      // An error here means the session went away while the PING was in flight; 'close' stops us.
      if (err && !session.closed) fail(`PING failed: ${err.message}`);
    });
  };
  const interval = setInterval(beat, options.intervalMs);
  interval.unref();
  session.once('close', stop);
  return stop;
}
