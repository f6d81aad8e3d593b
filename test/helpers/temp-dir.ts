import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardownable } from './daemon.js';

/** A fresh directory under the system temp dir, removed (with everything in it) at teardown. */
export async function tempDir(t: Teardownable, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `gate-${prefix}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}
