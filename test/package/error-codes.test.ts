// The error-code contract: every code is documented in README's table, and the table names no
// code that does not exist. Callers match on these strings; an undocumented one is a broken promise.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../lib/errors.js';

const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');
const documented = new Set([...readme.matchAll(/^\| `(GATE_ERR_[A-Z0-9_]+)` \|/gm)].map((m) => m[1]!));

t.test('README documents every GATE_ERR_* code, and only those', async (t) => {
  const codes = new Set<string>(Object.values(ErrorCodes));
  t.same([...codes].filter((c) => !documented.has(c)), [], 'no code missing from the table');
  t.same([...documented].filter((c) => !codes.has(c)), [], 'no code in the table that does not exist');
  t.ok(codes.size > 40, `${codes.size} codes`);
});

t.test('codes are unique and spelled GATE_ERR_<KEY>', async (t) => {
  for (const [key, code] of Object.entries(ErrorCodes)) t.equal(code, `GATE_ERR_${key}`, key);
});
