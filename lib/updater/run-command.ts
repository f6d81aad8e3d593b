import { spawn } from 'node:child_process';

export interface CommandResult {
  /** Exit code, or undefined when a signal (or a failure to start) ended it. */
  code: number | undefined;
  signal: string | undefined;
  /** Why it could not start (ENOENT ...), when it did not. */
  startError: string | undefined;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

export interface RunCommandOptions {
  /** SIGTERM after this long, SIGKILL 5 s later. */
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
  /** Kept per stream: enough for a version line or the tail of a package manager's complaint. */
  maxOutputBytes?: number;
}

/**
 * Runs `argv` without a shell (the words are passed as they are, see splitCommandLine), stdin
 * closed, output captured (the last `maxOutputBytes` of each stream). Never rejects: the result
 * says how it ended.
 */
export function runCommand(argv: string[], options: RunCommandOptions): Promise<CommandResult> {
  const max = options.maxOutputBytes ?? 64 * 1024;
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], ...(options.env ? { env: options.env } : {}) });
    const out = { stdout: '', stderr: '' };
    const keep = (key: 'stdout' | 'stderr') => (chunk: Buffer) => {
      out[key] = (out[key] + chunk.toString('utf8')).slice(-max);
    };
    child.stdout.on('data', keep('stdout'));
    child.stderr.on('data', keep('stderr'));
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    }, options.timeoutMs);
    let startError: string | undefined;
    child.once('error', (err: NodeJS.ErrnoException) => {
      startError = err.code ?? err.message;
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      resolve({ code: code ?? undefined, signal: signal ?? undefined, startError, timedOut, ...out });
    });
  });
}

/** How a command ended, for a log line or an error message. */
export function describeEnd(result: CommandResult): string {
  if (result.startError) return `could not start (${result.startError})`;
  if (result.timedOut) return 'timed out';
  if (result.signal) return `killed by ${result.signal}`;
  return `exited with ${result.code}`;
}
