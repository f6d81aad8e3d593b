import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Exit code of a command given wrong options (as getopt programs use). */
export const EXIT_USAGE = 2;

/**
 * parseArgs for a command; on a mistake prints what was wrong and the usage to stderr and returns
 * the exit code instead, so that `main` can return it.
 */
export function parseCommand<T extends ParseArgsConfig>(config: T, usage: string): ReturnType<typeof parseArgs<T>> | number {
  try {
    return parseArgs(config);
  } catch (err) {
    return usageError((err as Error).message, usage);
  }
}

/** Prints `message` and the usage to stderr; returns EXIT_USAGE. */
export function usageError(message: string, usage: string): number {
  process.stderr.write(`${message}\n\n${usage}`);
  return EXIT_USAGE;
}
