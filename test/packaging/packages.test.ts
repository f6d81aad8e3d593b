// `npm run package` as another version (GATE_PACKAGE_VERSION), the packages opened with dpkg-deb
// (nothing installed: test/system/ installs them, in CI): their fields, their files, the units as
// packaging/systemd has them, the Node.js runtime each gate-mux package carries (amd64 and arm64),
// and the installed tree run on its own runtime, as the wrappers run it.
import t from 'tap';
import { readFile, stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
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
  const muxArm = join(dir, `gate-mux_${DEB_VERSION}_arm64.deb`);
  const updater = join(dir, `gate-ent-updater_${DEB_VERSION}_all.deb`);
  t.same(
    built.stdout.trim().split('\n'),
    [join(dir, `gate-mux_${DEB_VERSION}_amd64.deb`), muxArm, updater],
    'it prints the files: gate-mux for amd64 and arm64, the updater for all',
  );

  const field = async (deb: string, name: string): Promise<string> => (await run('dpkg-deb', ['-f', deb, name])).stdout.trim();
  t.equal(await field(mux, 'Version'), DEB_VERSION, 'a pre-release sorts before its release: 1.2.3~rc.1');
  t.equal(await field(mux, 'Architecture'), arch);
  t.equal(
    await field(mux, 'Depends'),
    'libc6 (>= 2.28), libstdc++6 (>= 6), libgcc-s1, procps',
    "what the runtime links, and /bin/kill for the units' ExecReload; no nodejs",
  );
  t.equal(await field(muxArm, 'Architecture'), 'arm64');
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

  // The runtime: the pinned official binary, in the package, and its licence.
  const pinned = /^NODE_RUNTIME_VERSION=(.+)$/m.exec(await readFile(join(REPO_ROOT, 'packaging/node-runtime'), 'utf8'))![1]!;
  const node = join(root, 'usr/lib/gate-mux/node/bin/node');
  t.ok((await stat(join(root, 'usr/lib/gate-mux/node/LICENSE'))).size > 0, "Node.js's licence comes with it");
  const release = await run(node, ['-p', 'process.version + " " + process.release.lts']);
  t.equal(release.stdout.trim().split(' ')[0], `v${pinned}`, 'the pinned version');
  t.not(release.stdout.trim().split(' ')[1], 'undefined', 'an LTS line');
  // The wrappers name that runtime and nothing from PATH.
  for (const bin of ['gate-mux', 'gate-upgrade']) {
    const wrapper = await readFile(join(root, 'usr/bin', bin), 'utf8');
    t.match(wrapper, new RegExp(`^exec /usr/lib/gate-mux/node/bin/node /usr/lib/gate-mux/dist/lib/cli/${bin}\\.js "\\$@"$`, 'm'));
    t.notMatch(wrapper.replace(/^#.*$/gm, ''), /GATE_NODE|\$PATH|(^|[\s"])node[\s"]/, `${bin} runs no node from PATH`);
  }
  t.notOk(existsSync(join(control, 'preinst')), 'no preinst: nothing to check before installing');
  // The arm64 package carries the arm64 binary (it runs under qemu-user in test/system/).
  const armRoot = join(dir, 'arm-root');
  t.equal((await run('dpkg-deb', ['-x', muxArm, armRoot])).code, 0);
  const elf = await readFile(join(armRoot, 'usr/lib/gate-mux/node/bin/node'));
  t.equal(elf.readUInt16LE(18), 183, 'an ELF for AArch64 (e_machine 183)');
  t.equal((await readFile(node)).readUInt16LE(18), arch === 'amd64' ? 62 : 183, "this machine's package: its machine's binary");

  // The installed tree runs on its own runtime: its version, and commands that load every dependency.
  const app = join(root, 'usr/lib/gate-mux/dist/lib/cli');
  const version = await run(node, [join(app, 'gate-mux.js'), '--version'], { env: { PATH: '/nonexistent' } });
  t.same(
    version.stdout.split('\n'),
    [VERSION, `Node.js v${pinned} (${node})`, ''],
    'gate-mux --version: the package version, then its runtime',
  );
  const proxyHelp = await run(node, [join(app, 'gate-mux.js'), 'proxy', '--help']);
  t.equal(proxyHelp.code, 0, proxyHelp.stderr);
  const upgradeHelp = await run(node, [join(app, 'gate-upgrade.js'), 'run', '--help']);
  t.equal(upgradeHelp.code, 0, upgradeHelp.stderr);
  t.match(upgradeHelp.stdout, /package manager/);
});
