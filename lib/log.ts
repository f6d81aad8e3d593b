import { pino, type Logger } from 'pino';

export type { Logger };

/** The default logger is silent: a library never writes to stdout unless it is handed a logger. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** The one silent logger parts given none share (never handed out where a caller may change it). */
let quiet: Logger | undefined;

/**
 * Each part of gate-mux logs through a child naming its component, so lines can be filtered.
 * Without a parent nothing is written, so every such part shares one silent logger: a new pino
 * instance and child cost more than the rest of an agent's dial (one per tunnelled connection).
 */
export function componentLogger(parent: Logger | undefined, component: string): Logger {
  if (parent === undefined) return (quiet ??= silentLogger());
  return parent.child({ component });
}
