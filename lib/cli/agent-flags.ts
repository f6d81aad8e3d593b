import { open } from 'node:fs/promises';
import type { ParseArgsConfig } from 'node:util';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * The flags `gate-mux agent` and `gate-mux agent configure` share: where the proxy is and who the
 * agent is, spelled once so the file `configure` writes and the flags that override it agree.
 */
export const AGENT_JOIN_OPTIONS = {
  help: { type: 'boolean', short: 'h', default: false },
  proxy: { type: 'string' },
  'tunnel-addr': { type: 'string' },
  'server-name': { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  'ca-pin': { type: 'string' },
  name: { type: 'string' },
  'state-dir': { type: 'string' },
  /** The rollout group (updater.group): with `configure`, written to the file; with `agent`, reported instead of the file's. */
  'update-group': { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/** The environment variable an agent reads its join token from (as the packaged unit's EnvironmentFile sets it). */
export const JOIN_TOKEN_ENV = 'GATE_JOIN_TOKEN';
/** A token file larger than this is not a token. */
const TOKEN_FILE_LIMIT = 4096;

/**
 * The join token from, in order: `--token` (with a warning: the command line is shown to every
 * local user by `ps` and kept in shell history), `--token-file FILE` (its first line), or the
 * GATE_JOIN_TOKEN environment variable. Undefined when none is given. Errors name the flag.
 */
export async function joinTokenFrom(
  values: { token?: string | undefined; 'token-file'?: string | undefined },
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void,
): Promise<string | undefined> {
  if (values.token !== undefined && values['token-file'] !== undefined) {
    throw new GateError(ErrorCodes.INVALID_ARGUMENT, 'give the join token with --token-file or --token, not both');
  }
  if (values.token !== undefined) {
    warn(
      `warning: --token puts the join token on the command line, where \`ps\` shows it to every local user: use --token-file FILE or ${JOIN_TOKEN_ENV}`,
    );
    return values.token;
  }
  const file = values['token-file'];
  if (file !== undefined) {
    let text: string;
    try {
      const handle = await open(file, 'r');
      try {
        const { size } = await handle.stat();
        if (size > TOKEN_FILE_LIMIT)
          throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--token-file ${file}: ${size} bytes is not a join token`);
        text = await handle.readFile('utf8');
      } finally {
        await handle.close();
      }
    } catch (err) {
      if (err instanceof GateError) throw err;
      throw new GateError(
        ErrorCodes.INVALID_ARGUMENT,
        `--token-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    const token = text.split('\n')[0]?.trim() ?? '';
    if (token === '') throw new GateError(ErrorCodes.INVALID_ARGUMENT, `--token-file ${file} is empty`);
    return token;
  }
  const fromEnv = env[JOIN_TOKEN_ENV]?.trim();
  return fromEnv ? fromEnv : undefined;
}
