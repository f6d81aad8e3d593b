import { chmod, stat } from 'node:fs/promises';
import { ErrorCodes, GateError } from '../errors.js';

/**
 * Makes a secret file (a CA key, a join token) private to its owner, changing nothing when it is
 * already: a `data_dir` provisioned in advance on a read-only mount (a Kubernetes secret) refused
 * to start because of an unconditional chmod (EROFS, issue 37). When the mode does need changing
 * and cannot be: a file any user may read is refused with a message that says what to provision;
 * one readable by its group is left as provisioned (a secret mounted for a non-root process is
 * commonly 0440 with the pod's group).
 */
export async function privateToOwner(file: string): Promise<void> {
  const mode = (await stat(file)).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  try {
    await chmod(file, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if ((mode & 0o007) === 0) return;
    throw new GateError(
      ErrorCodes.CONFIG_INVALID,
      `${file} is readable by every user (mode ${mode.toString(8).padStart(4, '0')}) and cannot be changed (${code ?? (err as Error).message}): provision it with mode 0600, 0400 or 0440`,
      { cause: err },
    );
  }
}
