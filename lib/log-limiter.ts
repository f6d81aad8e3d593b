import type { Logger } from './log.js';

export const DEFAULT_LOG_BURST = 10;
export const DEFAULT_LOG_INTERVAL_MS = 10_000;

export interface LogLimiterOptions {
  /** Lines logged individually per code before the rest are only counted (default 10). */
  burst?: number;
  /** How often the counted ones are summarised, one line per code (default 10 000 ms). */
  intervalMs?: number;
}

type Level = 'info' | 'warn';

interface CodeWindow {
  level: Level;
  startedAt: number;
  logged: number;
  suppressed: number;
}

/**
 * Failure logging that cannot become the attack: a flood of 3,000 failed connections
 * used to write 3,000 lines. Per code, the first `burst` occurrences get their own line; after
 * that they are only counted, and one line per code and interval gives the exact count. Every
 * distinct code still gets its own first lines. The limiter only ever drops lines: counters
 * kept elsewhere (a multiplexer's stats()) stay exact. No timer runs unless lines are held back.
 */
export class LogLimiter {
  private readonly burst: number;
  private readonly intervalMs: number;
  private windows = new Map<string, CodeWindow>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    options: LogLimiterOptions = {},
  ) {
    this.burst = options.burst ?? DEFAULT_LOG_BURST;
    this.intervalMs = options.intervalMs ?? DEFAULT_LOG_INTERVAL_MS;
  }

  /** Logs `fields` and `message` under `code` at `level`, or counts it when the code is over its burst. */
  log(level: Level, code: string, fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    let window = this.windows.get(code);
    if (window && now - window.startedAt >= this.intervalMs) {
      // A code seen again after a quiet interval gets its own lines again.
      this.summarise(code, window);
      window = undefined;
    }
    if (!window) {
      window = { level, startedAt: now, logged: 0, suppressed: 0 };
      this.windows.set(code, window);
    }
    if (window.logged < this.burst) {
      window.logged++;
      this.logger[level](fields, message);
      return;
    }
    window.suppressed++;
    // The interval starts with the first line held back; it is unref'd so it never keeps a
    // process alive, and flush() (on close) ends it.
    this.timer ??= setTimeout(() => this.flush(), this.intervalMs).unref();
  }

  /** Writes one summary line per code with lines held back, and starts a new interval. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const windows = this.windows;
    this.windows = new Map();
    for (const [code, window] of windows) this.summarise(code, window);
  }

  private summarise(code: string, window: CodeWindow): void {
    if (window.suppressed === 0) return;
    this.logger[window.level](
      { code, suppressed: window.suppressed, logged: window.logged },
      `${window.suppressed} more ${code} not logged one by one (after ${window.logged} that were)`,
    );
  }
}
