// One concept per file: no file of lib/tunnel-framing/ grows past 500 lines (a session that does
// everything is where the framing's bugs hid; framed-session.ts keeps its rooms in their own files).
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MAX_LINES = 500;
const folder = fileURLToPath(new URL('../../../lib/tunnel-framing/', import.meta.url));

t.test(`every file of lib/tunnel-framing/ is at most ${MAX_LINES} lines`, async (t) => {
  const files = readdirSync(folder).filter((name) => name.endsWith('.ts'));
  t.ok(files.includes('framed-session.ts'), 'the folder was found');
  for (const name of files) {
    const lines = readFileSync(join(folder, name), 'utf8').split('\n').length - 1;
    t.ok(lines <= MAX_LINES, `${name}: ${lines} lines`);
  }
});
