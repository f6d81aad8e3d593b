import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

const SEARCH_DIRS = [
  ...(process.env.PATH ?? '').split(delimiter),
  '/usr/sbin',
  '/sbin',
  '/usr/lib/postgresql/17/bin',
  '/usr/lib/postgresql/16/bin',
  '/usr/lib/postgresql/15/bin',
];

/** Absolute path of an executable, looking in PATH and the sbin/Postgres folders Debian uses. */
export function findBinary(name: string): string | undefined {
  for (const dir of SEARCH_DIRS) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** The part of a tap Test that requirePeer uses (kept structural so any tap version fits). */
interface SkippableTest {
  fail(message: string): unknown;
  comment(...message: unknown[]): unknown;
  skip(name: string, fn: () => void): unknown;
}

/**
 * A real peer the test needs. In CI (CI=true) a missing peer fails the test: .ci/run installs
 * every peer, so absence is a broken machine, never a silent skip. On a developer machine the
 * test is skipped with the Debian package to install.
 */
export function requirePeer(t: SkippableTest, binary: string, debianPackage: string): string | undefined {
  const path = findBinary(binary);
  if (path) return path;
  const message = `needs ${binary}: apt-get install ${debianPackage}`;
  if (process.env.CI) t.fail(message);
  else t.skip(message, () => {}); // a named skipped subtest: the summary counts and shows it
  return undefined;
}
