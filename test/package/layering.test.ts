// The folder rules of docs/ARCHITECTURE.md ("Folders, and what each may import"), enforced: the
// table in the document is read here, so the rule and the check cannot drift apart.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const lib = join(root, 'lib');

/** folder (or top-level file, without .ts) → what it may import, from the document's table. */
function rulesFromDocument(): Map<string, Set<string>> {
  const text = readFileSync(join(root, 'docs', 'ARCHITECTURE.md'), 'utf8');
  const section = text.slice(text.indexOf('## Folders, and what each may import'), text.indexOf('## The wire contract'));
  const rules = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 5 || !cells[1]!.startsWith('`')) continue;
    // A remark in parentheses says why an edge is allowed; it is not a folder.
    const names = cells[3]!.replace(/\([^)]*\)/g, '').trim();
    const allowed = new Set(names === '—' ? [] : names.split(',').map((s) => s.trim()));
    for (const name of cells[1]!.matchAll(/`([a-z-]+)(?:\/|\.ts)`/g)) rules.set(name[1]!, allowed);
  }
  return rules;
}

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

/** The top-level unit of lib/ a file belongs to: its folder, or its own name for lib/x.ts. */
const unitOf = (file: string): string =>
  relative(lib, file)
    .split(sep)[0]!
    .replace(/\.[jt]s$/, '');

const rules = rulesFromDocument();
/** The package's two whole-library entries re-export from every part, so no rule binds them. */
const ENTRIES = new Set(['index', 'internal']);

t.test('the document has a rule for every folder and top-level file of lib/', async (t) => {
  const units = new Set([...sources(lib)].map(unitOf));
  for (const unit of units) if (!ENTRIES.has(unit)) t.ok(rules.has(unit), `${unit} has a row`);
  t.ok(rules.size >= 15, `${rules.size} rows read`);
});

t.test('every import between parts of lib/ is one the document allows', async (t) => {
  const violations: string[] = [];
  let edges = 0;
  for (const file of sources(lib)) {
    const from = unitOf(file);
    if (ENTRIES.has(from)) continue;
    const allowed = rules.get(from) ?? new Set<string>();
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const to = unitOf(join(dirname(file), m[1]!));
      if (to === from) continue;
      edges++;
      if (!allowed.has(to)) violations.push(`${relative(root, file)} imports ${to}`);
    }
  }
  t.same(violations, [], `${edges} imports across folders checked`);
});
