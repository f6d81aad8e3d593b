import { pino, type Logger } from 'pino';

export type { Logger };

/** The default logger is silent: a library never writes to stdout unless it is handed a logger. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** Each part of gate-mux logs through a child naming its component, so lines can be filtered. */
export function componentLogger(parent: Logger | undefined, component: string): Logger {
  return (parent ?? silentLogger()).child({ component });
}
