import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes, GateError } from '../errors.js';
import { privateToOwner } from '../pki/private-file.js';
import type { JoinTokenRule } from '../vocabulary/join-token-rule.js';

/** The file in `data_dir` holding the development join token. */
export const DEV_TOKEN_FILE = 'join-token';

/**
 * The development join token: made at first start (32 random bytes, hex) in `<dataDir>/join-token`
 * with mode 0600 and reused afterwards, so the agent command the proxy prints keeps working across
 * restarts. It admits any agent name, without expiry or use limit: it is how `npm start` on a
 * laptop gets its first agent. So it is off once the configuration has static tokens, unless
 * `auth_service.development_token: true` asks for it (lib/config/validate.ts); rather than a use
 * or time limit, which would reset at each restart, since it is re-read from its file.
 *
 * A file already there and right (64 hex digits, no access beyond its owner) is only read, so a
 * read-only `data_dir` (a secret mount) with the token provisioned starts; a write that is really
 * needed there fails with a message that says what to provision.
 */
export async function loadDevToken(dataDir: string): Promise<JoinTokenRule> {
  const file = join(dataDir, DEV_TOKEN_FILE);
  let token = await readFile(file, 'utf8').then(
    (text) => text.trim(),
    () => '',
  );
  if (!/^[0-9a-f]{64}$/.test(token)) {
    token = randomBytes(32).toString('hex');
    try {
      await mkdir(dataDir, { recursive: true, mode: 0o700 });
      await writeFile(file, `${token}\n`, { mode: 0o600 });
    } catch (err) {
      throw new GateError(
        ErrorCodes.CONFIG_INVALID,
        `cannot write the development join token ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): ` +
          'provision it (64 hex digits) or turn it off with auth_service.development_token: false',
        { cause: err },
      );
    }
  }
  await privateToOwner(file);
  return { token, agents: [], expiresAt: undefined, maxUses: undefined };
}
