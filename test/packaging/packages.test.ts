// `npm run package` as another version (GATE_PACKAGE_VERSION), the packages opened with dpkg-deb
// (nothing installed: test/system/ installs them, in CI): their fields, their files, the units as
// packaging/systemd has them, the installed tree's `gate-mux --version`, and the preinst's refusal
// of a Node.js older than 20.
import t from 'tap';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requirePeer } from '../helpers/peers.js';
import { run } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const VERSION = '1.2.3-rc.1';
const DEB_VERSION = '1.2.3~rc.1';

t.setTimeout(300_000);

t.test('gate-mux and gate-ent-updater, built as another version', async (t) => {
  if (!requirePeer(t, 'dpkg-deb', 'dpkg')) return;
  const dir = await tempDir(t, 'packages');
  // env -u: without tap's loader hooks in NODE_OPTIONS (tsc fails under them).
  const built = await run('env', ['-u', 'NODE_OPTIONS', 'npm', '--prefix', REPO_ROOT, 'run', '--silent', 'package'], {
    env: { ...process.env, GATE_PACKAGE_VERSION: VERSION, GATE_PACKAGE_DIR: dir },
    timeoutMs: 240_000,
  });
  t.equal(built.code, 0, built.stderr.slice(-2000));
  const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();
  const mux = join(dir, `gate-mux_${DEB_VERSION}_${arch}.deb`);
  const updater = join(dir, `gate-ent-updater_${DEB_VERSION}_all.deb`);
  t.same(built.stdout.trim().split('\n'), [mux, updater], 'it prints the two files');

  const field = async (deb: string, name: string): Promise<string> => (await run('dpkg-deb', ['-f', deb, name])).stdout.trim();
  t.equal(await field(mux, 'Version'), DEB_VERSION, 'a pre-release sorts before its release: 1.2.3~rc.1');
  t.equal(await field(mux, 'Architecture'), arch);
  t.equal(await field(mux, 'Depends'), '', 'no Depends on nodejs: the preinst checks the Node.js on PATH instead');
  t.equal(await field(updater, 'Architecture'), 'all');
  t.match(await field(updater, 'Depends'), /^gate-mux, init-system-helpers$/);

  const control = join(dir, 'control');
  await run('dpkg-deb', ['-e', mux, control]);
  t.equal(await readFile(join(control, 'conffiles'), 'utf8'), '/etc/default/gate\n');
  const root = join(dir, 'root');
  for (const deb of [mux, updater]) t.equal((await run('dpkg-deb', ['-x', deb, root])).code, 0);
  const shipped: Array<[string, string]> = [
    ['lib/systemd/system/gate.service', 'packaging/systemd/gate.service'],
    ['lib/systemd/system/gate-agent.service', 'packaging/systemd/gate-agent.service'],
    ['lib/systemd/system/gate-upgrade.service', 'packaging/systemd/gate-upgrade.service'],
    ['lib/systemd/system/gate-upgrade.timer', 'packaging/systemd/gate-upgrade.timer'],
    ['lib/systemd/system/gate-agent.service.d/gate-ent-updater.conf', 'packaging/systemd/gate-ent-updater.conf'],
    ['etc/default/gate', 'packaging/default/gate'],
    // What the yaml-language-server line `gate-mux agent configure` writes points at.
    ['usr/lib/gate-mux/schema/agent.schema.json', 'schema/agent.schema.json'],
    ['usr/lib/gate-mux/schema/gate.schema.json', 'schema/gate.schema.json'],
  ];
  for (const [installed, source] of shipped) {
    t.equal(await readFile(join(root, installed), 'utf8'), await readFile(join(REPO_ROOT, source), 'utf8'), installed);
  }
  for (const bin of ['gate-mux', 'gate-upgrade'])
    t.equal((await stat(join(root, 'usr/bin', bin))).mode & 0o111, 0o111, `${bin} is executable`);

  // The installed tree runs on its own: its version, and commands that load every dependency.
  const app = join(root, 'usr/lib/gate-mux/dist/lib/cli');
  const version = await run(process.execPath, [join(app, 'gate-mux.js'), '--version']);
  t.equal(version.stdout.trim(), VERSION, 'gate-mux --version reports the package version');
  const proxyHelp = await run(process.execPath, [join(app, 'gate-mux.js'), 'proxy', '--help']);
  t.equal(proxyHelp.code, 0, proxyHelp.stderr);
  const upgradeHelp = await run(process.execPath, [join(app, 'gate-upgrade.js'), 'run', '--help']);
  t.equal(upgradeHelp.code, 0, upgradeHelp.stderr);
  t.match(upgradeHelp.stdout, /package manager/);

  // The preinst: a Node.js older than 20 on PATH stops the install with what to do.
  const fakeBin = join(dir, 'old-node');
  await mkdir(fakeBin);
  await writeFile(join(fakeBin, 'node'), '#!/bin/sh\ncase "$1" in -p) echo 18;; *) echo v18.19.0;; esac\n', { mode: 0o755 });
  const old = await run(join(control, 'preinst'), ['install'], { env: { PATH: `${fakeBin}:/usr/bin:/bin` } });
  t.equal(old.code, 1);
  t.match(old.stderr, /'node' is Node.js v18\.19\.0; gate-mux needs 20 or later/);
  const missing = await run(join(control, 'preinst'), ['install'], { env: { PATH: join(dir, 'nothing') } });
  t.ok(
    missing.code === 0 || /Node.js 20 or later is needed/.test(missing.stderr),
    'without node on PATH the preinst looks in /usr/local/bin and /usr/bin, else says what is needed',
  );
  const current = await run(join(control, 'preinst'), ['install'], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  t.equal(current.code, 0, `this machine's Node.js passes: ${current.stderr}`);
  t.equal(
    (await run(join(control, 'preinst'), ['upgrade'], { env: { PATH: `${fakeBin}:/usr/bin:/bin` } })).code,
    1,
    'an upgrade is checked too',
  );
  t.equal(
    (await run(join(control, 'preinst'), ['abort-upgrade'], { env: { PATH: `${fakeBin}:/usr/bin:/bin` } })).code,
    0,
    'other actions are not',
  );
});
