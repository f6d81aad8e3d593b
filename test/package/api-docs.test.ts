// Every runtime name a public entry point exports has a heading on its page in docs/api/, and
// every heading there names something the entry point still exports (as error-codes.test.ts
// does for the error codes). A heading is `## `/`### ` followed by the name in backticks,
// optionally `new `; types are described under the function or class that uses them.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { documentedNames } from '../helpers/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, unknown> };
const SUBPATHS = ['mux', 'wire', 'client', 'proxy', 'tunnel', 'upgrade'];

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
    t.same(names.filter((n) => !headings.includes(n)), [], 'every export has a heading');
    t.same(headings.filter((h) => !names.includes(h)), [], 'every heading names an export');
    t.same(headings.filter((h, i) => headings.indexOf(h) !== i), [], 'no name has two headings');
  });
}

t.test("docs/api/gate-mux.md has a heading for each name only 'gate-mux' exports, and no other", async (t) => {
  const fromSubpaths = new Set((await Promise.all(SUBPATHS.map((s) => exported(`gate-mux/${s}`)))).flat());
  const ownNames = (await exported('gate-mux')).filter((n) => !fromSubpaths.has(n));
  t.ok(ownNames.length > 0, `${ownNames.length} names of its own`);
  const headings = documentedNames(page('gate-mux'));
  t.same(ownNames.filter((n) => !headings.includes(n)), [], 'every own export has a heading');
  t.same(headings.filter((h) => !ownNames.includes(h)), [], 'every heading names an own export');
});

t.test('the heading reader finds what a page names, and only headings', async (t) => {
  const sample = '# `gate-mux/x`\n\n### `forward`\ntext `notThis`\n### `new Multiplexer(options)`\n## Handlers\n';
  t.same(documentedNames(sample), ['forward', 'Multiplexer']);
});
