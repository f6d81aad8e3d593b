// Every runtime name a public entry point exports has a heading on its page in docs/api/, and
// every heading there names something the entry point still exports (as error-codes.test.ts
// does for the error codes). A heading is `## `/`### ` followed by the name in backticks,
// optionally `new `. The types an entry exports are each named (in backticks) on its page, under
// the function that uses them or in its "Types" list.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { documentedNames } from '../helpers/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, unknown> };
const SUBPATHS = ['mux', 'wire', 'client', 'proxy', 'tunnel', 'updater'];

/** The type-only names an entry file exports (`export type {…}`, `type X` inside `export {…}`). Pure. */
function exportedTypeNames(source: string): string[] {
  const names: string[] = [];
  for (const m of source.matchAll(/export (type )?\{([^}]*)\}/g)) {
    for (const item of m[2]!
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      if (m[1] === undefined && !item.startsWith('type ')) continue;
      names.push(
        item
          .replace(/^type /, '')
          .split(/\s+as\s+/)
          .at(-1)!,
      );
    }
  }
  return names;
}

const named = (markdown: string, name: string): boolean => new RegExp(`\`[^\`\n]*\\b${name}\\b[^\`\n]*\``).test(markdown);

const page = (name: string): string => readFileSync(`${root}docs/api/${name}.md`, 'utf8');
const exported = async (specifier: string): Promise<string[]> => Object.keys((await import(specifier)) as object).sort();

t.test('a page per entry point in "exports", and an entry point per page', async (t) => {
  const entries = Object.keys(pkg.exports).filter((k) => k !== './package.json' && k !== './internal');
  t.same(entries.map((k) => (k === '.' ? 'gate-mux' : k.slice(2))).sort(), [...SUBPATHS, 'gate-mux'].sort());
  t.match(page('internal'), /No stability promise/, 'gate-mux/internal says it is unstable');
});

for (const sub of SUBPATHS) {
  t.test(`docs/api/${sub}.md has one heading per export of gate-mux/${sub}, and no other`, async (t) => {
    const names = await exported(`gate-mux/${sub}`);
    const headings = documentedNames(page(sub));
    t.same(
      names.filter((n) => !headings.includes(n)),
      [],
      'every export has a heading',
    );
    t.same(
      headings.filter((h) => !names.includes(h)),
      [],
      'every heading names an export',
    );
    t.same(
      headings.filter((h, i) => headings.indexOf(h) !== i),
      [],
      'no name has two headings',
    );
  });
}

t.test("docs/api/gate-mux.md has a heading for each name only 'gate-mux' exports, and no other", async (t) => {
  const fromSubpaths = new Set((await Promise.all(SUBPATHS.map((s) => exported(`gate-mux/${s}`)))).flat());
  const ownNames = (await exported('gate-mux')).filter((n) => !fromSubpaths.has(n));
  t.ok(ownNames.length > 0, `${ownNames.length} names of its own`);
  const headings = documentedNames(page('gate-mux'));
  t.same(
    ownNames.filter((n) => !headings.includes(n)),
    [],
    'every own export has a heading',
  );
  t.same(
    headings.filter((h) => !ownNames.includes(h)),
    [],
    'every heading names an own export',
  );
});

for (const [entry, file] of [...SUBPATHS.map((s) => [s, `lib/${s}/index.ts`]), ['gate-mux', 'lib/index.ts']] as const) {
  t.test(`docs/api/${entry}.md names every type its entry exports`, async (t) => {
    const types = exportedTypeNames(readFileSync(`${root}${file}`, 'utf8'));
    const text = page(entry);
    t.same(
      types.filter((n) => !named(text, n)),
      [],
      `${types.length} types, each named on the page`,
    );
  });
}

t.test('the type reader takes type-only names and aliases, not values', async (t) => {
  const source = "export { a, type B, c as d, type E as F } from './x.js';\nexport type { G, H as I } from './y.js';";
  t.same(exportedTypeNames(source), ['B', 'F', 'G', 'I']);
  t.ok(named('`new X(o)`: takes `XOptions`', 'XOptions'));
  t.notOk(named('XOptions, not in backticks', 'XOptions'));
});

t.test('the heading reader finds what a page names, and only headings', async (t) => {
  const sample = '# `gate-mux/x`\n\n### `forward`\ntext `notThis`\n### `new Multiplexer(options)`\n## Handlers\n';
  t.same(documentedNames(sample), ['forward', 'Multiplexer']);
});
