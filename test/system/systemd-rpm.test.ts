// The RPMs under a real systemd, installed by real dnf, yum and zypper (Debian's own packages of
// dnf and zypper) in a booted Debian 12 without Node.js: from a repository signed with a throwaway
// key (package headers and repomd.xml.asc; gpgcheck and repo_gpgcheck on), install, the updater's
// timer enabled, the proxy and an agent started, then the upgrade as automatic updates make it:
// the timer's own service (`systemctl start gate-upgrade.service`) inside the maintenance window,
// with the agent's `updater.package_manager` naming the manager, runs `gate-upgrade run`, which
// installs the channel's version through that manager from the signed repository; the version is
// read back, both services were restarted and /etc/default/gate is kept as the operator changed
// it. Then an erase that stops and disables the services.
//
// yum: on RHEL 8 and later `yum` is dnf (/usr/bin/yum is a symlink to dnf-3). Debian packages no
// yum, so the container gets /usr/bin/yum -> dnf-3, as RHEL ships it: the yum round proves that
// gate-upgrade's yum commands are ones that dnf-as-yum accepts, not a yum 3 (RHEL 7, Python 2).
//
// Debian's rpm database is empty: an RPM distribution's base packages provide what gate-mux
// requires (libc.so.6, libstdc++.so.6, libgcc_s.so.1, procps, systemd, /bin/sh). A stand-in
// package built here provides those names, for the Debian libraries that are really there.
//
// CI only, once per run, everything removed at teardown (as test/system/systemd-apt.test.ts).
import t from 'tap';
import { cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
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
/** Succeeds once the agent's current run (its unit's invocation) says its tunnel is up. */
const AGENT_TUNNEL_UP =
  'journalctl -u gate-agent _SYSTEMD_INVOCATION_ID="$(systemctl show -p InvocationID --value gate-agent)" -o cat --no-pager' +
  " | grep -q 'tunnel up'";
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

const why = systemTestSkip();

t.setTimeout(900_000);

t.test('RPMs installed by dnf, yum and zypper, upgraded by gate-upgrade.service through them, erased', { skip: why }, async (t) => {
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
  // The root systemd-apt.test.ts boots too (tinyproxy is for its HTTPS_PROXY): one root per CI run.
  const rootTarball = debianRootTarball(t, ['dnf', 'zypper', 'tinyproxy']);

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
    // yum as RHEL 8 and later ship it, beside dnf -> dnf-3 as Debian has it too (see the header).
    await symlink('dnf-3', join(root, 'usr/bin/yum'));
  });
  phase('container booted');
  t.equal((await box.exec('command -v node nodejs')).stdout, '', 'no Node.js in the container');

  const mainPid = async (unit: string) => Number((await box.sh(`systemctl show -p MainPID --value ${unit}`)).trim());
  const rpmVersion = async () => (await box.exec('rpm -q --qf %{VERSION} gate-mux')).stdout.trim();

  const managers: Array<[string, { install: string; erase: string }]> = [
    ['dnf', { install: `dnf -y install gate-mux-${V1} gate-ent-updater-${V1}`, erase: 'dnf -y remove gate-ent-updater gate-mux' }],
    ['yum', { install: `yum -y install gate-mux-${V1} gate-ent-updater-${V1}`, erase: 'yum -y remove gate-ent-updater gate-mux' }],
    [
      'zypper',
      {
        // The operator's first install trusts the repository's key (zypper asks; here it is told to).
        install: `zypper --non-interactive --gpg-auto-import-keys install gate-mux=${V1} gate-ent-updater=${V1}`,
        erase: 'zypper --non-interactive remove gate-ent-updater gate-mux',
      },
    ],
  ];
  for (const [manager, commands] of managers) {
    await t.test(manager, async (t) => {
      // (Again each round: dnf's remove takes the stand-in with it, as a dependency no longer needed.)
      await box.sh('rpm -q debian-base-provides >/dev/null || rpm -i --nodeps /root/base.rpm');
      const installed = await box.exec(commands.install, { timeoutMs: 300_000 });
      t.equal(installed.code, 0, `${manager} install: ${installed.stdout.slice(-2000)}${installed.stderr.slice(-2000)}`);
      t.equal(await rpmVersion(), V1, `${manager} installed ${V1}`);
      t.equal((await box.sh('gate-mux --version')).split('\n')[0], V1, 'the installed program runs on its runtime');
      t.match((await box.sh('rpm -q --qf "%{RSAHEADER:pgpsig}" gate-mux')).trim(), /RSA\/SHA\d+/, 'installed from a signed package');
      t.equal((await box.exec('systemctl is-enabled gate-upgrade.timer')).stdout.trim(), 'enabled', 'the updater enables the timer');
      t.equal((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active', 'and starts it');
      phase(`${manager}: installed`);

      // The proxy, its channel already at V2 and its maintenance window open now.
      await openWindowLongEnough();
      await writeFile(join(box.root, 'etc/gate/gate.yaml'), gateYaml(V2));
      await box.sh('echo "GATE_FLAGS=--log-level info" >> /etc/default/gate');
      await box.sh('systemctl enable --now gate');
      await until(
        async () => (await box.exec(`curl -sS --cacert ${CA} https://127.0.0.1:3080/webapi/ping`)).code === 0,
        'the proxy answers',
        60_000,
      );
      // The agent, enrolled with this package manager (--force: the previous round's file).
      await box.sh(
        'gate-mux agent configure --force --proxy 127.0.0.1:3080 --server-name localhost --token-file /var/lib/gate/proxy/join-token' +
          ` --ca-pin ${await caPin()} --name node-1 --allow 127.0.0.1:7000 --upgrade-channel stable/cloud --package-manager ${manager}`,
      );
      await box.sh('systemctl enable --now gate-agent');
      await untilOk(AGENT_TUNNEL_UP, 'the agent holds its tunnel');
      t.equal(
        (await box.sh('gate-upgrade dry-run')).split('\n')[0],
        `an upgrade is available (${V1} -> ${V2})`,
        `the running version read from the rpm database (package_manager: ${manager})`,
      );

      phase(`${manager}: proxy and agent up`);
      const proxyBefore = await mainPid('gate');
      const agentBefore = await mainPid('gate-agent');
      const cursor = /^-- cursor: (.+)$/m.exec(await box.sh('journalctl -n 0 --show-cursor --no-pager'))![1]!;
      const ran = await box.exec('systemctl start gate-upgrade.service', { timeoutMs: 300_000 });
      const journal = (await box.exec(`journalctl -u gate-upgrade --after-cursor='${cursor}' -o cat --no-pager`)).stdout;
      t.equal(ran.code, 0, `gate-upgrade.service: ${ran.stderr}\n${journal.slice(-4000)}`);
      t.equal((await box.sh('systemctl show -p ExecMainStatus --value gate-upgrade')).trim(), '0', 'the run installed (exit 0)');
      // (Written in the first round; the later ones find it up to date: the file outlives an erase.)
      t.match(
        journal,
        /^(wrote the maintenance schedule to|the maintenance schedule in \S+ is up to date)/m,
        'the service exported the schedule first',
      );
      t.match(journal, new RegExp(`"method":"${manager}"`), `installed through ${manager}`);
      t.match(journal, new RegExp(`upgraded ${esc(V1)} -> ${esc(V2)}`), 'journalctl -u gate-upgrade shows the decision');
      t.equal(await rpmVersion(), V2, 'the rpm database has the new version');
      t.equal((await box.sh('gate-mux --version')).split('\n')[0], V2, 'and the program says it');
      t.match((await box.sh('rpm -q --qf "%{RSAHEADER:pgpsig}" gate-mux')).trim(), /RSA\/SHA\d+/, 'from a signed package');
      await until(async () => (await mainPid('gate')) > 0, 'the proxy runs again', 30_000);
      t.not(await mainPid('gate'), proxyBefore, 'the running proxy was restarted on upgrade');
      t.not(await mainPid('gate-agent'), agentBefore, 'the running agent was restarted on upgrade');
      await untilOk(AGENT_TUNNEL_UP, 'the upgraded agent re-joins');
      t.equal((await box.sh('gate-upgrade dry-run')).split('\n')[0], `no upgrades available (${V2} == ${V2})`, 'nothing left to do');
      t.match(await box.sh('cat /etc/default/gate'), /^GATE_FLAGS=--log-level info$/m, '/etc/default/gate kept as the operator changed it');
      t.equal((await box.exec('test -e /etc/default/gate.rpmnew')).code, 1, 'no .rpmnew beside it: the shipped file did not change');

      phase(`${manager}: upgraded by gate-upgrade.service`);
      const erased = await box.exec(commands.erase, { timeoutMs: 300_000 });
      t.equal(erased.code, 0, `${manager} erase: ${erased.stdout.slice(-2000)}${erased.stderr.slice(-2000)}`);
      for (const unit of ['gate', 'gate-agent']) {
        t.not((await box.exec(`systemctl is-active ${unit}`)).stdout.trim(), 'active', `${unit} stopped on erase`);
        t.not((await box.exec(`systemctl is-enabled ${unit}`)).stdout.trim(), 'enabled', 'and disabled');
      }
      t.not((await box.exec('systemctl is-active gate-upgrade.timer')).stdout.trim(), 'active', 'the timer stopped');
      t.equal((await box.exec('test -e /usr/lib/systemd/system/gate.service')).code, 1, 'the units are gone');
      await box.exec('rm -f /etc/gate/gate.yaml /etc/default/gate.rpmsave');
      phase(`${manager}: erased`);
    });
  }

  /** The proxy's CA pin, from what it prints at start. */
  async function caPin(): Promise<string> {
    return /agents: CA pin (sha256:[0-9a-f]{64})/.exec(await box.sh('journalctl -u gate -o cat --no-pager'))![1]!;
  }

  /** Retries `command` inside the container until it exits 0 (up to 60 s). */
  async function untilOk(command: string, what: string): Promise<void> {
    await until(
      async () => {
        const ok = (await box.exec(command, { timeoutMs: 20_000 })).code === 0;
        if (!ok) await new Promise((resolve) => setTimeout(resolve, 250));
        return ok;
      },
      what,
      60_000,
    );
  }
});

/**
 * The proxy's file: the channel at `version`, a maintenance window that opens this hour today (the
 * window lasts an hour), agents on the same port.
 */
function gateYaml(version: string): string {
  const now = new Date();
  return [
    'version: v3',
    'data_dir: /var/lib/gate/proxy',
    'auth_service:',
    '  proxy_listener_mode: multiplex',
    'proxy_service:',
    '  web_listen_addr: 127.0.0.1:3080',
    '  public_addr: localhost:3080',
    '  automatic_upgrades_channels:',
    '    stable/cloud:',
    `      static_version: v${version}`,
    '  cluster_maintenance_config:',
    '    agent_upgrades:',
    `      utc_start_hour: ${now.getUTCHours()}`,
    `      weekdays: [${DAYS[now.getUTCDay()]}]`,
    '',
  ].join('\n');
}

/**
 * A round takes well under two minutes from writing the window to the service's run: in the last
 * two minutes of an hour, wait for the next one, so the window written is still open at the run.
 */
async function openWindowLongEnough(): Promise<void> {
  const now = new Date();
  if (now.getUTCMinutes() >= 58)
    await new Promise((r) => setTimeout(r, ((60 - now.getUTCMinutes()) * 60 - now.getUTCSeconds() + 1) * 1000));
}

function esc(version: string): string {
  return version.replaceAll('.', '\\.');
}
