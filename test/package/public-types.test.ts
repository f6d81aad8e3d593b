// Issue 39: a stable entry point must not hand out a type that only gate-mux/internal exports —
// a user could hold a GateProxy yet not name what its getters return, and the internal type could
// change under them in any release. Read from the emitted declarations: from each stable entry in
// package.json "exports", every type its exported declarations reference must be exported by some
// stable entry too.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportsOf, leaksOf } from '../helpers/declaration-surface.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { types?: string }>;
};
const stable = Object.entries(pkg.exports)
  .filter(([sub]) => sub !== './internal' && sub !== './package.json')
  .map(([sub, target]) => ({ sub, types: resolve(root, (target as { types: string }).types) }));

t.test('the checker reads what the entries export', async (t) => {
  t.ok(stable.length >= 6, `${stable.length} stable entries`);
  const proxy = exportsOf(stable.find((e) => e.sub === './proxy')!.types);
  t.match(proxy.get('GateProxy')?.file ?? '', /lib[/\\]proxy[/\\]gate-proxy\.d\.ts$/, 'GateProxy is followed to its declaring file');
  const internal = exportsOf(resolve(root, 'dist/lib/internal.d.ts'));
  t.ok(internal.has('ListenerPlan'), 'and so is an internal entry, which it can tell apart');
});

t.test('the checker finds a leak when there is one', async (t) => {
  // Two declaration files: the entry exports Pub, whose member is typed with Hidden, which only
  // the other file declares and no entry exports.
  const dir = mkdtempSync(resolve(tmpdir(), 'public-types-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(resolve(dir, 'hidden.d.ts'), 'export interface Hidden {\n    x: number;\n}\n');
  writeFileSync(
    resolve(dir, 'pub.d.ts'),
    "import type { Hidden } from './hidden.js';\nexport interface Pub {\n    part: Hidden;\n}\nexport interface Plain {\n    n: number;\n}\n",
  );
  writeFileSync(resolve(dir, 'entry.d.ts'), "export type { Pub, Plain } from './pub.js';\n");
  t.same(
    leaksOf([resolve(dir, 'entry.d.ts')], dir).map((l) => `${l.from} -> ${l.type}`),
    ['pub.d.ts#Pub -> hidden.d.ts#Hidden'],
  );
});

t.test('no stable declaration references a type only gate-mux/internal exports', async (t) => {
  const leaks = leaksOf(
    stable.map((e) => e.types),
    resolve(root, 'dist'),
  ).map((l) => `${l.from} -> ${l.type}`.replace(/\.d\.ts/g, ''));
  // `X -> Y`: public X references Y, which only gate-mux/internal exports (or nothing does). Fix:
  // export Y (type-only) from the entry that exports X, or narrow X so it no longer names Y.
  t.same(leaks, [], 'every type reachable from a stable entry is exported by a stable entry');
});
