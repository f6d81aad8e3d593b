// `npm run package` as another version (GATE_PACKAGE_VERSION), the packages opened with dpkg-deb
// (nothing installed: test/system/ installs them, in CI): their fields, their files, the units as
// packaging/systemd has them, the Node.js runtime each gate-mux package carries (amd64 and arm64),
// and the installed tree run on its own runtime, as the wrappers run it: this machine's natively,
// the arm64 one under qemu-user.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ranOnceThisCiRun } from '../helpers/once-per-ci-run.js';
import { requirePeer } from '../helpers/peers.js';
import { run } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const VERSION = '1.2.3-rc.1';
const DEB_VERSION = '1.2.3~rc.1';

t.setTimeout(600_000);

// Each package carries its own pinned Node.js runtime and runs on it, whatever node runs this test:
// building and opening them again on another Node major proves nothing new, so once per CI run.
const ranBefore = ranOnceThisCiRun('the packages carry their own Node.js runtime; the Node major running the test does not enter them');

t.test('gate-mux and gate-ent-updater, built as another version', { skip: ranBefore }, async (t) => {
  if (!requirePeer(t, 'dpkg-deb', 'dpkg') || !requirePeer(t, 'rpmbuild', 'rpm') || !requirePeer(t, 'gpg', 'gpg')) return;
  const dir = await tempDir(t, 'packages');
  // A throwaway key: the RPM headers are signed when GATE_PACKAGE_KEY names one.
  const gnupg = join(dir, 'gnupg');
  await mkdir(gnupg, { mode: 0o700 });
  const gpgEnv = { ...process.env, GNUPGHOME: gnupg };
  const keyMade = await run(
    'gpg',
    ['--batch', '--passphrase', '', '--quick-gen-key', 'gate-mux test <test@example.invalid>', 'rsa3072', 'sign', '1d'],
    {
      env: gpgEnv,
      timeoutMs: 60_000,
    },
  );
  t.equal(keyMade.code, 0, keyMade.stderr);
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(
    (await run('gpg', ['--batch', '--with-colons', '--list-keys'], { env: gpgEnv })).stdout,
  )![1]!;
  // env -u: without tap's loader hooks in NODE_OPTIONS (tsc fails under them).
  const built = await run('env', ['-u', 'NODE_OPTIONS', 'npm', '--prefix', REPO_ROOT, 'run', '--silent', 'package'], {
    // Unpacked: the test reads the files, and packing 4 runtimes would only spend time.
    env: {
      ...gpgEnv,
      GATE_PACKAGE_VERSION: VERSION,
      GATE_PACKAGE_DIR: dir,
      GATE_PACKAGE_KEY: fingerprint,
      GATE_PACKAGE_COMPRESSION: 'none',
    },
    timeoutMs: 400_000,
  });
  t.equal(built.code, 0, built.stderr.slice(-2000));
  const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();
  const mux = join(dir, `gate-mux_${DEB_VERSION}_${arch}.deb`);
  const muxArm = join(dir, `gate-mux_${DEB_VERSION}_arm64.deb`);
  const updater = join(dir, `gate-ent-updater_${DEB_VERSION}_all.deb`);
  t.same(
    built.stdout.trim().split('\n'),
    [
      join(dir, `gate-mux_${DEB_VERSION}_amd64.deb`),
      muxArm,
      updater,
      join(dir, `gate-mux-${DEB_VERSION}-1.x86_64.rpm`),
      join(dir, `gate-mux-${DEB_VERSION}-1.aarch64.rpm`),
      join(dir, `gate-ent-updater-${DEB_VERSION}-1.noarch.rpm`),
    ],
    'it prints the files: gate-mux for amd64 and arm64, the updater for all, as .debs and as RPMs',
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
  // The arm64 package carries the arm64 binary, and it runs (under qemu-user, below).
  const armRoot = join(dir, 'arm-root');
  t.equal((await run('dpkg-deb', ['-x', muxArm, armRoot])).code, 0);
  const elf = await readFile(join(armRoot, 'usr/lib/gate-mux/node/bin/node'));
  t.equal(elf.readUInt16LE(18), 183, 'an ELF for AArch64 (e_machine 183)');
  t.equal((await readFile(node)).readUInt16LE(18), arch === 'amd64' ? 62 : 183, "this machine's package: its machine's binary");
  if (arch !== 'arm64') await t.test('the arm64 package runs under qemu-user', (t) => armUnderQemu(t, armRoot, pinned));

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

  // The RPMs: the same files as the .debs (by SHA-256; units in /usr/lib/systemd/system), signed.
  const rpmArch = arch === 'amd64' ? 'x86_64' : 'aarch64';
  const rpm = join(dir, `gate-mux-${DEB_VERSION}-1.${rpmArch}.rpm`);
  const rpmUpdater = join(dir, `gate-ent-updater-${DEB_VERSION}-1.noarch.rpm`);
  const query = async (file: string, format: string): Promise<string> => {
    const r = await run('rpm', ['-qp', '--nosignature', '--qf', format, file], { timeoutMs: 60_000 });
    t.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  t.equal(await query(rpm, '%{VERSION}-%{RELEASE} %{ARCH}'), `${DEB_VERSION}-1 ${rpmArch}`, 'rpm sorts 1.2.3~rc.1 before 1.2.3 too');
  for (const [file, deb] of [
    [rpm, mux],
    [rpmUpdater, updater],
  ] as const) {
    const fromRpm = new Map<string, string>();
    // Names may hold spaces (npm packages' fixtures): mode and digest first, the name last.
    for (const line of (await query(file, '[%{FILEMODES:perms} %{FILEDIGESTS} %{FILENAMES}\n]')).trim().split('\n')) {
      const [, perms, digest, path] = /^(\S+) (\S*) (.*)$/.exec(line)!;
      if (perms!.startsWith('-')) fromRpm.set(path!, digest!);
    }
    const debRoot = join(dir, `files-of-${deb.split('/').at(-1)}`);
    await run('dpkg-deb', ['-x', deb, debRoot]);
    const listing = (await run('find', [debRoot, '-type', 'f'], { timeoutMs: 60_000 })).stdout.trim().split('\n');
    const fromDeb = new Map<string, string>();
    for (const path of listing) {
      const installed = path.slice(debRoot.length).replace(/^\/lib\/systemd\//, '/usr/lib/systemd/');
      fromDeb.set(
        installed,
        createHash('sha256')
          .update(await readFile(path))
          .digest('hex'),
      );
    }
    t.same([...fromRpm.entries()].sort(), [...fromDeb.entries()].sort(), `${file.split('/').at(-1)} holds the .deb's files`);
  }
  t.match(
    await query(rpm, '[%{FILENAMES} %{FILEFLAGS:fflags}\n]'),
    /^\/etc\/default\/gate cn$/m,
    '/etc/default/gate is %config(noreplace)',
  );
  const requires = await query(rpm, '[%{REQUIRENAME}\n]');
  t.match(requires, /libstdc\+\+\.so\.6/);
  t.notMatch(requires, /node/, 'nothing named node is required');
  const muxScripts = await query(rpm, '%{PREUN}\n---\n%{POSTUN}');
  t.match(muxScripts, /systemctl disable --now gate-agent\.service gate\.service/, 'erase stops and disables the services');
  t.match(muxScripts, /try-restart gate-agent\.service gate\.service/, 'an upgrade restarts them');
  t.match(await query(rpmUpdater, '%{POSTIN}'), /systemctl enable gate-upgrade\.timer/, 'the updater enables the timer');
  t.match(await query(rpmUpdater, '[%{REQUIRENAME}\n]'), /^gate-mux$/m);
  // The header signature, checked by rpm against the public key (in a scratch database).
  const rpmdb = join(dir, 'rpmdb');
  await mkdir(rpmdb);
  const publicKey = join(dir, 'key.asc');
  await run('sh', ['-c', `gpg --batch --armor --export ${fingerprint} > ${publicKey}`], { env: gpgEnv });
  t.equal((await run('rpm', ['--dbpath', rpmdb, '--import', publicKey])).code, 0);
  for (const file of [rpm, rpmUpdater]) {
    const checked = await run('rpm', ['--dbpath', rpmdb, '--checksig', '-v', file], { timeoutMs: 60_000 });
    t.match(checked.stdout, /Header V4 RSA\/SHA\d+ Signature, key ID [0-9a-f]+: OK/, `${file.split('/').at(-1)}: signed`);
  }
});

/** Where Debian's cross packages put the arm64 C and C++ runtime: the dynamic loader, libc, libstdc++, libgcc_s. */
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';

/**
 * The arm64 package's runtime and code, run on this machine by qemu-user (Debian's
 * qemu-user-static): the binary is dynamically linked, so qemu is given an arm64 sysroot, which
 * Debian's libc6-arm64-cross, libstdc++6-arm64-cross and libgcc-s1-arm64-cross packages provide
 * (.ci/install-peers installs them). Nothing is booted or installed: the .deb's own tree runs.
 */
async function armUnderQemu(t: Test, armRoot: string, pinned: string): Promise<void> {
  const qemu = requirePeer(t, 'qemu-aarch64-static', 'qemu-user-static');
  if (!qemu) return;
  if (!existsSync(join(ARM64_SYSROOT, 'lib/ld-linux-aarch64.so.1')) || !existsSync(join(ARM64_SYSROOT, 'lib/libstdc++.so.6'))) {
    const message = `needs an arm64 sysroot in ${ARM64_SYSROOT}: apt-get install libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross`;
    if (process.env.CI) t.fail(message);
    else t.skip(message, () => {});
    return;
  }
  const armNode = join(armRoot, 'usr/lib/gate-mux/node/bin/node');
  const app = join(armRoot, 'usr/lib/gate-mux/dist/lib/cli');
  const emulated = (args: string[]) =>
    run(qemu, ['-L', ARM64_SYSROOT, armNode, ...args], { env: { PATH: '/nonexistent' }, timeoutMs: 120_000 });
  const arch = await emulated(['-p', 'process.arch + " " + process.version']);
  t.equal(arch.stdout.trim(), `arm64 v${pinned}`, 'the runtime is the pinned one, and an arm64 process');
  const version = await emulated([join(app, 'gate-mux.js'), '--version']);
  t.same(
    version.stdout.split('\n'),
    [VERSION, `Node.js v${pinned} (${armNode})`, ''],
    `gate-mux --version under qemu: the package version, then its runtime ${version.stderr}`,
  );
  // (Not `proxy --help` as on this machine's runtime above: the same JavaScript, and emulated it
  // took 37 s on a loaded two-core machine, against 8 s for --version.)
}
