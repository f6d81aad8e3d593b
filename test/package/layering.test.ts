// The folder rules of docs/ARCHITECTURE.md ("Folders, and what each may import"), enforced: the
// table in the document is read here, so the rule and the check cannot drift apart.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const lib = join(root, 'lib');

/** What one folder may import of another: all of it, or only the files an "(only ...)" names. */
type Allowance = 'all' | Set<string>;

/** Splits "a, b (x, y), c" at the commas outside parentheses. */
function topLevelItems(cell: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of cell) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      items.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim() !== '') items.push(current.trim());
  return items;
}

/**
 * One "may import" cell: each item is a folder, optionally with a remark in parentheses. A remark
 * that starts with "only" restricts the edge to the files it names in backquotes; any other remark
 * only says why.
 */
function parseAllowed(cell: string): { allowed: Map<string, Allowance>; problems: string[] } {
  const allowed = new Map<string, Allowance>();
  const problems: string[] = [];
  if (cell.trim() === '—') return { allowed, problems };
  for (const item of topLevelItems(cell)) {
    const open = item.indexOf('(');
    const name = (open < 0 ? item : item.slice(0, open)).trim();
    const remark = open < 0 ? '' : item.slice(open + 1, item.lastIndexOf(')')).trim();
    if (!remark.startsWith('only')) {
      allowed.set(name, 'all');
      continue;
    }
    // The files are named before the first colon; what follows says why (and may quote names).
    const files = new Set([...remark.split(':')[0]!.matchAll(/`([\w.-]+\.ts)`/g)].map((m) => m[1]!));
    if (files.size === 0) problems.push(`"${name} (${remark})" names no file, so it cannot be checked`);
    allowed.set(name, files);
  }
  return { allowed, problems };
}

/** folder (or top-level file, without .ts) → what it may import, from the document's table. */
function rulesFromDocument(): { rules: Map<string, Map<string, Allowance>>; problems: string[] } {
  const text = readFileSync(join(root, 'docs', 'ARCHITECTURE.md'), 'utf8');
  const section = text.slice(text.indexOf('## Folders, and what each may import'), text.indexOf('## The wire contract'));
  const rules = new Map<string, Map<string, Allowance>>();
  const problems: string[] = [];
  for (const line of section.split('\n')) {
    // A cell may hold a `|` only inside backquotes, which the table does not use; split plainly.
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 5 || !cells[1]!.startsWith('`')) continue;
    const parsed = parseAllowed(cells[3]!);
    problems.push(...parsed.problems);
    for (const name of cells[1]!.matchAll(/`([a-z-]+)(?:\/|\.ts)`/g)) rules.set(name[1]!, parsed.allowed);
  }
  return { rules, problems };
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

/** Each import between units of lib/: the importing file, its unit, the imported file (as .ts) and unit. */
function importsAcrossUnits(): { file: string; from: string; target: string; to: string }[] {
  const found = [];
  for (const file of sources(lib)) {
    const from = unitOf(file);
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = join(dirname(file), m[1]!).replace(/\.js$/, '.ts');
      const to = unitOf(target);
      if (to !== from) found.push({ file, from, target, to });
    }
  }
  return found;
}

/** The cycles of a directed graph, each once, as the path that closes it (empty: none). */
function cyclesOf(graph: Map<string, Iterable<string>>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): void => {
    state.set(node, 'visiting');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'visiting') cycles.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(node, 'done');
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

const { rules, problems } = rulesFromDocument();
/** The package's two whole-library entries re-export from every part, so no rule binds them. */
const ENTRIES = new Set(['index', 'internal']);

t.test('the document has a rule for every folder and top-level file of lib/', async (t) => {
  const units = new Set([...sources(lib)].map(unitOf));
  for (const unit of units) if (!ENTRIES.has(unit)) t.ok(rules.has(unit), `${unit} has a row`);
  t.ok(rules.size >= 15, `${rules.size} rows read`);
  for (const [unit, allowed] of rules) for (const to of allowed.keys()) t.ok(rules.has(to), `${unit} may import ${to}, which has a row`);
});

t.test('every "(only ...)" in the document names the files it allows', async (t) => {
  t.same(problems, []);
  let exceptions = 0;
  for (const allowed of rules.values()) for (const a of allowed.values()) if (a !== 'all') exceptions++;
  t.ok(exceptions >= 8, `${exceptions} exceptions read`);
});

t.test('every import between parts of lib/ is one the document allows', async (t) => {
  const violations: string[] = [];
  let edges = 0;
  for (const { file, from, target, to } of importsAcrossUnits()) {
    if (ENTRIES.has(from)) continue;
    edges++;
    const allowance = rules.get(from)?.get(to);
    if (allowance === undefined) violations.push(`${relative(root, file)} imports ${to}`);
    else if (allowance !== 'all' && !allowance.has(relative(join(lib, to), target)))
      violations.push(`${relative(root, file)} imports ${relative(lib, target)}, outside "${to} (only ${[...allowance].join(', ')})"`);
  }
  t.same(violations, [], `${edges} imports across folders checked`);
});

t.test('no cycle between folders: neither in the document nor in the imports', async (t) => {
  t.same(cyclesOf(new Map([...rules].map(([unit, allowed]) => [unit, [...allowed.keys()]]))), [], 'the table is layered');
  const imports = new Map<string, Set<string>>();
  for (const { from, to } of importsAcrossUnits()) {
    if (ENTRIES.has(from)) continue;
    if (!imports.has(from)) imports.set(from, new Set());
    imports.get(from)!.add(to);
  }
  t.same(cyclesOf(imports), [], 'the imports are layered');
});

t.test('the checks themselves: an "(only ...)" is read, a cycle is found', async (t) => {
  const { allowed, problems } = parseAllowed('errors, mux (only `options.ts`, `a.ts`: defaults, say `b.ts`), pki (only the pin)');
  t.equal(allowed.get('errors'), 'all');
  t.same([...(allowed.get('mux') as Set<string>)], ['options.ts', 'a.ts']);
  t.equal(problems.length, 1, 'an exception that names no file is reported');
  t.same(parseAllowed('—').allowed.size, 0);
  t.same(
    cyclesOf(
      new Map([
        ['a', ['b']],
        ['b', ['c']],
        ['c', ['a']],
        ['d', ['a']],
      ]),
    ),
    [['a', 'b', 'c', 'a']],
  );
  t.same(cyclesOf(new Map([['a', ['b']]])), []);
});
