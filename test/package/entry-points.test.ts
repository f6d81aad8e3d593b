// The package's entry points as a consumer imports them (by name, through package.json
// "exports"), and what each one costs to load.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as {
  exports: Record<string, unknown>;
  bin: Record<string, string>;
};
const subpaths = Object.keys(pkg.exports).filter((k) => k !== './package.json');

/**
 * Every package a module can load: the import graph of the emitted JavaScript from `entry`,
 * following static imports, re-exports and dynamic import() alike (a conservative answer: a
 * lazily loaded package counts, unless `dynamic` is false). Returns the bare specifiers reached and the files read.
 */
function packagesReached(entry: string, options: { dynamic?: boolean } = {}): { packages: Set<string>; files: number } {
  const dynamic = options.dynamic ?? true;
  const edge = /(?:^|[;\s])(?:import|export)\s*(?:[^'";]*?\bfrom\s*)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;
  const seen = new Set<string>();
  const packages = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of readFileSync(file, 'utf8').matchAll(edge)) {
      if (m[2] !== undefined && !dynamic) continue;
      const spec = (m[1] ?? m[2])!;
      if (spec.startsWith('.')) stack.push(resolve(dirname(file), spec));
      else if (!spec.startsWith('node:')) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  return { packages, files: seen.size };
}

t.test('every subpath in "exports" imports by package name and exports something', async (t) => {
  t.same(subpaths.sort(), ['.', './client', './internal', './mux', './proxy', './tunnel', './updater', './wire'].sort());
  for (const sub of subpaths) {
    const specifier = sub === '.' ? 'gate-mux' : `gate-mux/${sub.slice(2)}`;
    const module = (await import(specifier)) as Record<string, unknown>;
    t.ok(Object.keys(module).length > 0, `${specifier}: ${Object.keys(module).length} exports`);
  }
});

t.test('the root entry carries every name of the public entries but the updater, and none of gate-mux/internal', async (t) => {
  const rootNames = new Set(Object.keys(await import('gate-mux')));
  t.ok(rootNames.size <= 100, `at most 100 runtime names at the root (${rootNames.size})`);
  const updater = Object.keys(await import('gate-mux/updater'));
  t.same(
    updater.filter((n) => rootNames.has(n)),
    [],
    'the updater stays on gate-mux/updater',
  );
  for (const sub of ['mux', 'wire', 'client', 'proxy', 'tunnel']) {
    const missing = Object.keys(await import(`gate-mux/${sub}`)).filter((n) => !rootNames.has(n));
    t.same(missing, [], `gate-mux/${sub}: nothing missing from 'gate-mux'`);
  }
  const internal = Object.keys(await import('gate-mux/internal'));
  t.ok(internal.includes('PeerPool') && internal.includes('planListeners'), 'gate-mux/internal carries the building blocks');
  t.same(
    internal.filter((n) => rootNames.has(n)),
    [],
    'no name is both public and internal',
  );
  t.notOk(rootNames.has('firstNonEmpty'), 'helpers stay internal');
});

t.test('the multiplexer alone loads no certificate, proxy-dialing or YAML package', async (t) => {
  const mux = packagesReached(resolve(root, 'dist/lib/mux/index.js'), { dynamic: false });
  t.same([...mux.packages].sort(), ['pino'], `gate-mux/mux loads only pino (the logger) in ${mux.files} files`);
  // On demand, one more: bson, the first time a failed MongoDB route is answered in its protocol.
  const muxLazy = packagesReached(resolve(root, 'dist/lib/mux/index.js'));
  t.same([...muxLazy.packages].sort(), ['bson', 'pino'], 'and on demand only bson (the answer to a failed MongoDB route)');
  // The check must be able to fail: the whole package does reach them.
  const all = packagesReached(resolve(root, 'dist/lib/index.js'));
  for (const heavy of ['node-forge', 'proxy-agent', 'socks', 'yaml']) t.ok(all.packages.has(heavy), `'gate-mux' reaches ${heavy}`);
});

t.test('the gate-mux command loads a subcommand only when it runs', async (t) => {
  const bin = resolve(root, pkg.bin['gate-mux']!);
  const atStart = packagesReached(bin, { dynamic: false });
  t.same([...atStart.packages], [], `gate-mux itself loads no package before a subcommand is chosen (${atStart.files} files)`);
  const withCommands = packagesReached(bin);
  t.ok(withCommands.packages.has('node-forge') && withCommands.packages.has('yaml'), 'the proxy subcommand, loaded on demand, does');
});
