// One concept per file: no source file of lib/ grows past 500 lines. A file that does everything is
// where bugs hid (framed-session.ts before its rooms, gate-upgrade.ts before its split); past the
// limit, move a concept out into a file named for it.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const MAX_LINES = 500;
const lib = fileURLToPath(new URL('../../../lib/', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

t.test(`every source file of lib/ is at most ${MAX_LINES} lines`, async (t) => {
  const files = sources(lib);
  t.ok(files.length > 100, `${files.length} files read`);
  const over = files
    .map((file) => ({ file: relative(lib, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
    .filter(({ lines }) => lines > MAX_LINES)
    .map(({ file, lines }) => `${file}: ${lines} lines`);
  t.same(over, [], 'none is over the limit');
});
