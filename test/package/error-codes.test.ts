// The error-code contract: every code is documented in docs/errors.md's table, once, and the table
// names no code that does not exist. Callers match on these strings; an undocumented one is a broken promise.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../lib/errors.js';

const table = readFileSync(fileURLToPath(new URL('../../../docs/errors.md', import.meta.url)), 'utf8');
const rows = [...table.matchAll(/^\| `(GATE_ERR_[A-Z0-9_]+)` \|/gm)].map((m) => m[1]!);
const documented = new Set(rows);

t.test('docs/errors.md documents every GATE_ERR_* code, once, and only those', async (t) => {
  const codes = new Set<string>(Object.values(ErrorCodes));
  t.same(
    [...codes].filter((c) => !documented.has(c)),
    [],
    'no code missing from the table',
  );
  t.same(
    [...documented].filter((c) => !codes.has(c)),
    [],
    'no code in the table that does not exist',
  );
  t.same(
    rows.filter((c, i) => rows.indexOf(c) !== i),
    [],
    'no code has two rows',
  );
  t.ok(codes.size > 40, `${codes.size} codes`);
});

t.test('codes are unique and spelled GATE_ERR_<KEY>', async (t) => {
  for (const [key, code] of Object.entries(ErrorCodes)) t.equal(code, `GATE_ERR_${key}`, key);
});
