// The RPMs under a real systemd, installed by real dnf and zypper (Debian's own packages of both)
// in a booted Debian 12 without Node.js: from a repository signed with a throwaway key (package
// headers and repomd.xml.asc; gpgcheck and repo_gpgcheck on), install, the updater's timer enabled,
// the proxy started, an upgrade that restarts it and keeps /etc/default/gate as the operator changed
// it, and an erase that stops and disables the services.
//
// Debian's rpm database is empty: an RPM distribution's base packages provide what gate-mux
// requires (libc.so.6, libstdc++.so.6, libgcc_s.so.1, procps, systemd, /bin/sh). A stand-in
// package built here provides those names, for the Debian libraries that are really there.
//
// CI only, once per run, everything removed at teardown (as test/system/systemd-apt.test.ts).
import t from 'tap';
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bootDebian, debianRootTarball, systemTestSkip } from '../helpers/booted-debian.js';
import { run, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const V1 = '1.8.0';
const V2 = '1.9.0';
const CA = '/var/lib/gate/proxy/ca.pem';

const why = systemTestSkip();

t.setTimeout(900_000);

t.test('RPMs installed, upgraded and erased by dnf and zypper under systemd', { skip: why }, async (t) => {
  for (const [binary, pkg] of [
    ['mmdebstrap', 'mmdebstrap'],
    ['systemd-nspawn', 'systemd-container'],
    ['rpmbuild', 'rpm'],
    ['createrepo_c', 'createrepo-c'],
    ['gpg', 'gpg'],
  ] as const) {
    if (!requirePeer(t, binary, pkg)) return;
  }
  const work = await tempDir(t, 'systemd-rpm');
  const started = Date.now();
  const phase = (what: string) => t.comment(`${((Date.now() - started) / 1000).toFixed(0)} s: ${what}`);
  const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();
  const rootTarball = debianRootTarball(t, ['dnf', 'zypper']);

  const gnupg = join(work, 'gnupg');
  await mkdir(gnupg, { mode: 0o700 });
  const gpgEnv = { ...process.env, GNUPGHOME: gnupg };
  t.equal(
    (
      await run(
        'gpg',
        ['--batch', '--passphrase', '', '--quick-gen-key', 'gate-mux test <test@example.invalid>', 'rsa3072', 'sign', '1d'],
        { env: gpgEnv, timeoutMs: 60_000 },
      )
    ).code,
    0,
  );
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(
    (await run('gpg', ['--batch', '--with-colons', '--list-keys'], { env: gpgEnv })).stdout,
  )![1]!;
  const packages = join(work, 'packages');
  for (const version of [V1, V2]) {
    const built = await run('env', ['-u', 'NODE_OPTIONS', 'npm', '--prefix', REPO_ROOT, 'run', '--silent', 'package'], {
      env: {
        ...gpgEnv,
        GATE_PACKAGE_VERSION: version,
        GATE_PACKAGE_DIR: packages,
        GATE_PACKAGE_ARCHES: arch,
        GATE_PACKAGE_COMPRESSION: 'none',
        GATE_PACKAGE_KEY: fingerprint,
      },
      timeoutMs: 400_000,
    });
    t.equal(built.code, 0, `npm run package at ${version}: ${built.stderr.slice(-2000)}`);
  }
  const repos = join(work, 'repos');
  const published = await run('bash', [join(REPO_ROOT, 'packaging/build-repos')], {
    env: { ...gpgEnv, GATE_PACKAGE_DIR: packages, GATE_REPO_DIR: repos, GATE_PACKAGE_KEY: fingerprint },
    timeoutMs: 120_000,
  });
  t.equal(published.code, 0, published.stderr);
  const rpmRepo = join(repos, 'rpm');
  const repoFile = (await readFile(join(rpmRepo, 'gate-mux.repo'), 'utf8')).replaceAll('@BASEURL@', 'file:///srv/gate-rpm');
  t.match(repoFile, /^gpgcheck=1$/m);
  t.match(repoFile, /^repo_gpgcheck=1$/m);

  // The stand-in for an RPM distribution's base packages (see the header).
  const shim = join(work, 'shim');
  await mkdir(shim);
  await writeFile(
    join(shim, 'base.spec'),
    [
      'Name: debian-base-provides',
      'Version: 12',
      'Release: 1',
      'Summary: what an RPM distribution base provides, for the Debian libraries in place',
      'License: Apache-2.0',
      'BuildArch: noarch',
      'Provides: /bin/sh, systemd, procps, libc.so.6(GLIBC_2.28)(64bit), libstdc++.so.6()(64bit), libgcc_s.so.1()(64bit)',
      '%description',
      'Test stand-in.',
      '%files',
      '',
    ].join('\n'),
  );
  const shimBuilt = await run(
    'rpmbuild',
    ['-bb', '--quiet', '--define', `_topdir ${join(shim, 'top')}`, '--define', `_rpmdir ${join(shim, 'rpms')}`, join(shim, 'base.spec')],
    { timeoutMs: 60_000 },
  );
  t.equal(shimBuilt.code, 0, shimBuilt.stderr);
  phase('packages built and published');

  const box = await bootDebian(t, await rootTarball, async (root) => {
    await cp(rpmRepo, join(root, 'srv/gate-rpm'), { recursive: true });
    await cp(join(shim, 'rpms/noarch/debian-base-provides-12-1.noarch.rpm'), join(root, 'root/base.rpm'));
    await mkdir(join(root, 'etc/yum.repos.d'), { recursive: true });
    await writeFile(join(root, 'etc/yum.repos.d/gate-mux.repo'), repoFile);
    // Debian's rpm keeps its database per user (~/.rpmdb); libzypp reads /var/lib/rpm, as the RPM
    // distributions do: one database for rpm, dnf and zypper.
    await mkdir(join(root, 'etc/rpm'), { recursive: true });
    await writeFile(join(root, 'etc/rpm/macros'), '%_dbpath /var/lib/rpm\n');
    // dnf reads the release from the distribution's release package, which Debian has not.
    await mkdir(join(root, 'etc/dnf/vars'), { recursive: true });
    await writeFile(join(root, 'etc/dnf/vars/releasever'), '12\n');
    await mkdir(join(root, 'etc/zypp/repos.d'), { recursive: true });
    await writeFile(join(root, 'etc/zypp/repos.d/gate-mux.repo'), repoFile);
  });
  phase('container booted');
  t.equal((await box.exec('command -v node nodejs')).stdout, '', 'no Node.js in the container');

  const mainPid = async (unit: string) => Number((await box.sh(`systemctl show -p MainPID --value ${unit}`)).trim());
  const rpmVersion = async () => (await box.exec('rpm -q --qf %{VERSION} gate-mux')).stdout.trim();
  const gateYaml = [
    'version: v3',
    'data_dir: /var/lib/gate/proxy',
    'proxy_service:',
    '  web_listen_addr: 127.0.0.1:3080',
    '  public_addr: localhost:3080',
    '',
  ].join('\n');

  const managers: Array<[string, { install: (v: string) => string; upgrade: (v: string) => string; erase: string }]> = [
    [
      'dnf',
      {
        install: (v) => `dnf -y install gate-mux-${v} gate-ent-updater-${V1}`,
        upgrade: (v) => `dnf -y install gate-mux-${v}`,
        erase: 'dnf -y remove gate-ent-updater gate-mux',
      },
    ],
    [
      'zypper',
      {
        install: (v) => `zypper --non-interactive --gpg-auto-import-keys install gate-mux=${v} gate-ent-updater=${V1}`,
        upgrade: (v) => `zypper --non-interactive install gate-mux=${v}`,
        erase: 'zypper --non-interactive remove gate-ent-updater gate-mux',
      },
    ],
  ];
  for (const [manager, commands] of managers) {
    await t.test(manager, async (t) => {
      // (Again before zypper: dnf's remove takes the stand-in with it, as a dependency no longer needed.)
      await box.sh('rpm -q debian-base-provides >/dev/null || rpm -i --nodeps /root/base.rpm');
      const installed = await box.exec(commands.install(V1), { timeoutMs: 300_000 });
      t.equal(installed.code, 0, `${manager} install: ${installed.stdout.slice(-2000)}${installed.stderr.slice(-2000)}`);
      t.equal(await rpmVersion(), V1);
      t.equal((await box.sh('gate-mux --version')).split('\n')[0], V1, 'the installed program runs on its runtime');
      t.match((await box.sh('rpm -q --qf "%{RSAHEADER:pgpsig}" gate-mux')).trim(), /RSA\/SHA\d+/, 'installed from a signed package');
      t.equal((await box.exec('systemctl is-enabled gate-upgrade.timer')).stdout.trim(), 'enabled', 'the updater enables the timer');
      t.equal((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active');

      await writeFile(join(box.root, 'etc/gate/gate.yaml'), gateYaml);
      await box.sh('echo "GATE_FLAGS=--log-level info" >> /etc/default/gate');
      await box.sh('systemctl enable --now gate');
      await until(
        async () => (await box.exec(`curl -sS --cacert ${CA} https://127.0.0.1:3080/webapi/ping`)).code === 0,
        'the proxy answers',
        60_000,
      );
      const before = await mainPid('gate');

      const upgraded = await box.exec(commands.upgrade(V2), { timeoutMs: 300_000 });
      t.equal(upgraded.code, 0, `${manager} upgrade: ${upgraded.stdout.slice(-2000)}${upgraded.stderr.slice(-2000)}`);
      t.equal(await rpmVersion(), V2);
      await until(async () => (await mainPid('gate')) > 0, 'the proxy runs again', 30_000);
      t.not(await mainPid('gate'), before, 'the running proxy was restarted on upgrade');
      t.match(await box.sh('cat /etc/default/gate'), /^GATE_FLAGS=--log-level info$/m, '/etc/default/gate kept as the operator changed it');
      t.equal((await box.exec('test -e /etc/default/gate.rpmnew')).code, 1, 'no .rpmnew beside it: the shipped file did not change');

      const erased = await box.exec(commands.erase, { timeoutMs: 300_000 });
      t.equal(erased.code, 0, `${manager} erase: ${erased.stdout.slice(-2000)}${erased.stderr.slice(-2000)}`);
      t.not((await box.exec('systemctl is-active gate')).stdout.trim(), 'active', 'the proxy stopped on erase');
      t.not((await box.exec('systemctl is-enabled gate')).stdout.trim(), 'enabled', 'and disabled');
      t.not((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active', 'the timer stopped');
      t.equal((await box.exec('test -e /usr/lib/systemd/system/gate.service')).code, 1, 'the units are gone');
      await box.exec('rm -f /etc/gate/gate.yaml /etc/default/gate.rpmsave');
    });
  }
  phase('dnf and zypper done');
});
