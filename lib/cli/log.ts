import { ErrorCodes, GateError } from '../errors.js';
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type LogFormat = 'pretty' | 'json';

const LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Checks a `--log-level` value. */
export function isLogLevel(value: string): value is LevelWithSilent {
  return LEVELS.includes(value);
}

/**
 * The logger of a command: readable lines when its output is a terminal (pino-pretty, run by
 * pino's transport worker so formatting never blocks the relay), one JSON object per line
 * otherwise (journald, log shippers). `format` overrides the guess. `fd` 1 or 2: commands whose
 * stdout is for results (local-proxy prints its address there) log to stderr.
 */
export function cliLogger(level: LevelWithSilent, format: LogFormat | undefined, fd: 1 | 2 = 1): Logger {
  const stream = fd === 1 ? process.stdout : process.stderr;
  const pretty = format ? format === 'pretty' : stream.isTTY === true;
  if (!pretty) return pino({ level }, pino.destination(fd));
  return pino(
    { level },
    pino.transport({ target: 'pino-pretty', options: { destination: fd, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }),
  );
}

/** Checks a `--log-format` value. */
export function parseLogFormat(value: string | undefined): LogFormat | undefined | GateError {
  if (value === undefined || value === 'pretty' || value === 'json') return value;
  return new GateError(ErrorCodes.INVALID_ARGUMENT, `--log-format ${value}: expected pretty or json`);
}

/**
 * A command's logger from its `--log-level` and `--log-format` values, or the usage mistake to
 * report: one check for every command.
 */
export function loggerFromOptions(level: string, format: string | undefined, fd: 1 | 2 = 1): Logger | GateError {
  if (!isLogLevel(level)) return new GateError(ErrorCodes.INVALID_ARGUMENT, `--log-level ${level}: expected ${LEVELS.join(', ')}`);
  const parsed = parseLogFormat(format);
  if (parsed instanceof GateError) return parsed;
  return cliLogger(level, parsed, fd);
}
