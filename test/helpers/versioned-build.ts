import { cp, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Teardownable } from './daemon.js';
import { tempDir } from './temp-dir.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * This package built as another version: dist/lib and examples/gate.yaml copied (copied, not
 * linked: the package reads its version from the package.json above its own files, and Node
 * resolves links to where they point) and a package.json that says `version`; node_modules and
 * the native addon's build/ linked. Returns the copy's gate-mux.js; removed at teardown.
 */
export async function versionedBuild(t: Teardownable, version: string): Promise<string> {
  const dir = await tempDir(t, `build-${version}`);
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string };
  await writeFile(join(dir, 'package.json'), JSON.stringify({ ...pkg, version }, null, 2));
  await cp(join(root, 'dist', 'lib'), join(dir, 'dist', 'lib'), { recursive: true });
  await cp(join(root, 'examples', 'gate.yaml'), join(dir, 'examples', 'gate.yaml'));
  await symlink(join(root, 'node_modules'), join(dir, 'node_modules'));
  await symlink(join(root, 'build'), join(dir, 'build'));
  return join(dir, 'dist', 'lib', 'cli', 'gate-mux.js');
}
