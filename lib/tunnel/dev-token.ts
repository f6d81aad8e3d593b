import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { JoinTokenRule } from './join-tokens.js';

/** The file in `data_dir` holding the development join token. */
export const DEV_TOKEN_FILE = 'join-token';

/**
 * The development join token: made at first start (32 random bytes, hex) in `<dataDir>/join-token`
 * with mode 0600 and reused afterwards, so the agent command the proxy prints keeps working across
 * restarts. It admits any agent name, without expiry or use limit: it is how `npm start` on a
 * laptop gets its first agent, and whoever can read the data directory can read the CA key anyway.
 */
export async function loadDevToken(dataDir: string): Promise<JoinTokenRule> {
  const file = join(dataDir, DEV_TOKEN_FILE);
  let token = await readFile(file, 'utf8').then(
    (text) => text.trim(),
    () => '',
  );
  if (!/^[0-9a-f]{64}$/.test(token)) {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    token = randomBytes(32).toString('hex');
    await writeFile(file, `${token}\n`, { mode: 0o600 });
  }
  await chmod(file, 0o600);
  return { token, agents: [], expiresAt: undefined, maxUses: undefined };
}
