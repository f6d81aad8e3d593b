// The platform document's enrollment procedure (Linux agents), step by step, with real apt on
// this machine: two versions of the packages `npm run package` builds, in a local repository
// (dpkg-scanpackages); gate-mux installed at the channel's version and gate-ent-updater beside it;
// the installed agent's unit run as systemd would; a non-root user that owns the schedule file;
// `gate-upgrade dry-run` with no flags; then the channel moves and `gate-upgrade run` defers,
// installs in the window, and installs a critical version at once.
//
// It installs packages, writes under /etc and adds a user, so it runs only where CI=true (a fresh
// machine), once per CI run (.ci/test-nodes sets GATE_MUX_MACHINE_TESTS=done for the other Node
// majors), and purges and removes everything it made, also when it fails.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { chown, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { parseConfig } from '../../lib/config/load.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { runClient } from '../helpers/clients.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, readUntil, run, startTaggedTcpServer, tlsClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { addSystemUser, isRoot, removeSystemUser } from '../helpers/system-user.js';
import { readUnit, startUnitCommand, unitEnvironment, unitValue } from '../helpers/systemd-unit.js';
import { tempDir } from '../helpers/temp-dir.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const USER = 'gate-e2e-agent';
// Versions apart from package.json's, so the test never confuses them with the checkout's; major 1,
// the test proxy's (1.2.3-interop), which admits agents of its own major and the one below.
const V1 = '1.8.0';
const V2 = '1.9.0';
// 2026-08-02 is a Sunday; the schedule opens a window on Sundays at 02:00 UTC.
const INSIDE = '2026-08-02T02:30:00Z';
const OUTSIDE = '2026-08-02T05:00:00Z';

const why =
  process.env.CI !== 'true'
    ? 'installs packages, writes under /etc and adds a user: runs only where CI=true (a fresh machine)'
    : process.env.GATE_MUX_MACHINE_TESTS === 'done'
      ? 'ran once already in this CI run (GATE_MUX_MACHINE_TESTS=done): the machine test is not repeated per Node major'
      : !isRoot()
        ? 'needs root (dpkg, useradd)'
        : false;

t.setTimeout(600_000);

t.test('enrollment procedure (Linux agents) with real apt', { skip: why }, async (t) => {
  for (const [binary, pkg] of [
    ['dpkg-deb', 'dpkg'],
    ['dpkg-scanpackages', 'dpkg-dev'],
    ['apt-get', 'apt'],
    ['systemd-analyze', 'systemd'],
    ['deb-systemd-helper', 'init-system-helpers'],
  ] as const) {
    if (!requirePeer(t, binary, pkg)) return;
  }
  if (sh('dpkg-query', ['-W', '-f=${Status}', 'gate-mux'], true).includes('installed')) {
    t.fail('gate-mux is already installed on this machine: the test will not replace it');
    return;
  }
  const hadEtcGate = existsSync('/etc/gate');
  const work = await tempDir(t, 'enroll');
  const env = {
    DEBIAN_FRONTEND: 'noninteractive',
    APT_CONFIG: join(work, 'apt.conf'),
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
  };

  // Undo everything, whatever happened (registered first, so it runs last).
  t.teardown(async () => {
    await rm('/etc/gate-upgrade.d/schedule', { force: true });
    sh('dpkg', ['--purge', 'gate-ent-updater', 'gate-mux'], true, env);
    await rm('/etc/gate/agent.yaml', { force: true });
    if (!hadEtcGate) await rm('/etc/gate', { recursive: true, force: true });
    removeSystemUser(USER);
  });

  // The repository: both versions, built from this checkout by `npm run package`.
  const repo = join(work, 'repo');
  for (const version of [V1, V2]) {
    // env -u: without tap's loader hooks, which tap adds to every child's NODE_OPTIONS (tsc fails under them).
    const built = await run('env', ['-u', 'NODE_OPTIONS', 'npm', '--prefix', REPO_ROOT, 'run', '--silent', 'package'], {
      env: { ...process.env, GATE_PACKAGE_VERSION: version, GATE_PACKAGE_DIR: repo },
      timeoutMs: 300_000,
    });
    t.equal(built.code, 0, `npm run package at ${version}: ${built.stderr.slice(-2000)}`);
  }
  t.same(sh('ls', [repo]).trim().split('\n').sort(), [
    `gate-ent-updater_${V1}_all.deb`,
    `gate-ent-updater_${V2}_all.deb`,
    `gate-mux_${V1}_${arch()}.deb`,
    `gate-mux_${V2}_${arch()}.deb`,
  ]);
  // -m: every version in the index (by default only the newest of each package is listed).
  await writeFile(join(repo, 'Packages'), sh('dpkg-scanpackages', ['-m', '.', '/dev/null'], false, env, repo));
  // apt sees this repository only (its own lists and cache): nothing leaves the machine, and the
  // machine's lists are not touched. gate-upgrade's `apt-get update` inherits APT_CONFIG.
  await mkdir(join(work, 'lists', 'partial'), { recursive: true });
  await mkdir(join(work, 'cache', 'archives', 'partial'), { recursive: true });
  await writeFile(join(work, 'sources.list'), `deb [trusted=yes] file:${repo} ./\n`);
  await writeFile(
    env.APT_CONFIG,
    [
      `Dir::Etc::sourcelist "${join(work, 'sources.list')}";`,
      'Dir::Etc::sourceparts "/nonexistent";',
      `Dir::State::Lists "${join(work, 'lists')}";`,
      `Dir::Cache "${join(work, 'cache')}";`,
      'APT::Get::List-Cleanup "false";',
      '',
    ].join('\n'),
  );
  t.equal(sh('apt-get', ['update', '-q'], false, env).includes('file:'), true, 'apt reads the local repository');

  // The cluster: a proxy whose channel serves V1, with a maintenance schedule, and a resource.
  const tagged = await startTaggedTcpServer('enrolled-target');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: { redis: `tunnel:node-1/${target}` },
    proxyService: {
      automatic_upgrades_channels: { 'stable/cloud': { static_version: `v${V1}` } },
      cluster_maintenance_config: { agent_upgrades: { utc_start_hour: 2, weekdays: ['Sun'] } },
    },
  });
  const port = gate.port('multiplex');
  const moveChannel = async (channel: Record<string, unknown>): Promise<void> => {
    const doc = parseYaml(gate.yaml) as { proxy_service: Record<string, unknown> };
    doc.proxy_service.automatic_upgrades_channels = { 'stable/cloud': channel };
    await gate.proxy.reload(parseConfig(stringifyYaml(doc)).config);
  };

  // Step 2: the target version from the channel endpoint, leading v removed.
  const served = await runClient(
    'curl',
    ['-sS', '--cacert', gate.caFile, `https://127.0.0.1:${port}/v1/webapi/automaticupgrades/channel/stable/cloud/version`],
    { env },
  );
  const version = served.stdout.toString().trim().replace(/^v/, '');
  t.equal(version, V1);

  // Step 3: the agent at that version, and gate-ent-updater.
  sh('apt-get', ['install', '-y', '-q', `gate-mux=${version}`, 'gate-ent-updater'], false, env);
  // Step 4: the installed version, from the package database and the program.
  t.equal(sh('dpkg-query', ['-W', '-f=${Version}', 'gate-mux']), V1);
  t.equal(sh('/usr/bin/gate-mux', ['--version'], false, env).trim(), V1);
  // gate-ent-updater came at its newest version (the procedure names no version for it).
  const updaterVersion = sh('dpkg-query', ['-W', '-f=${Version}', 'gate-ent-updater']);
  t.equal(updaterVersion, V2);
  t.ok(existsSync('/etc/systemd/system/timers.target.wants/gate-upgrade.timer'), 'gate-upgrade.timer enabled on install');
  t.ok(existsSync('/lib/systemd/system/gate-agent.service.d/gate-ent-updater.conf'), 'the enrollment drop-in is installed');
  t.same(
    sh('dpkg-query', ['-W', '-f=${Conffiles}', 'gate-mux']).trim().split(' ')[0],
    '/etc/default/gate',
    '/etc/default/gate is a conffile',
  );
  const verified = await run('systemd-analyze', [
    'verify',
    '--man=no',
    ...['gate.service', 'gate-agent.service', 'gate-upgrade.service', 'gate-upgrade.timer'].map((u) => `/lib/systemd/system/${u}`),
  ]);
  t.equal(verified.code, 0, `systemd-analyze verify on the installed units: ${verified.stderr}`);

  // The agent: configured by the installed command, started as its installed unit starts it.
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  sh(
    '/usr/bin/gate-mux',
    [
      'agent',
      'configure',
      '--proxy',
      `127.0.0.1:${port}`,
      '--server-name',
      'localhost',
      '--token',
      token,
      '--ca-pin',
      caPin(gate.ca),
      '--name',
      'node-1',
      '--resource',
      `db:orders=${target}@orders.example.test`,
      '--upgrade-channel',
      'stable/cloud',
      '--package-manager',
      'apt',
    ],
    false,
    env,
  );
  t.equal((await stat('/etc/gate/agent.yaml')).mode & 0o777, 0o600);
  const unit = readUnit('/lib/systemd/system/gate-agent.service');
  const agent = startUnitCommand(t, unitValue(unit, 'Service', 'ExecStart')!, unitEnvironment(unit, { base: { PATH: env.PATH } }), {});
  await until(() => agent.output().includes('tunnel up: agent node-1'), 'the installed agent holds its tunnel', 30_000);
  const client = await tlsClient(port, { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'enrolled-target',
    'traffic reaches the resource through the installed agent',
  );
  client.destroy();
  agent.child.kill('SIGTERM');
  t.equal(await agent.exited, 0);

  // Step 5: the agent runs as a non-root user, who owns its files and the schedule file.
  const user = addSystemUser(USER);
  for (const path of [
    '/etc/gate/agent.yaml',
    '/var/lib/gate',
    '/var/lib/gate/agent',
    ...['agent-key.pem', 'agent.pem', 'ca.pem'].map((f) => `/var/lib/gate/agent/${f}`),
  ]) {
    await chown(path, user.uid, user.gid);
  }
  await writeFile('/etc/gate-upgrade.d/schedule', '');
  await chown('/etc/gate-upgrade.d/schedule', user.uid, user.gid);
  const asUser = await runClient('/usr/bin/gate-upgrade', ['export-schedule'], {
    env: { PATH: env.PATH },
    uid: user.uid,
    gid: user.gid,
    timeoutMs: 60_000,
  });
  t.equal(asUser.code, 0, asUser.stderr);
  t.match(asUser.stdout.toString(), /wrote the maintenance schedule to \/etc\/gate-upgrade.d\/schedule/);
  t.equal((await stat('/etc/gate-upgrade.d/schedule')).uid, user.uid, "still the agent user's file");

  // Step 6: dry-run, no flags.
  const dry = await gateUpgrade(['dry-run'], env);
  t.equal(dry.code, 0, dry.stderr);
  t.equal(dry.stdout.split('\n')[0], `no upgrades available (${V1} == ${V1})`);
  t.equal(dry.stderr, '', 'no warning: the schedule was exported');

  // The channel moves: outside the window nothing changes (exit 3)...
  await moveChannel({ static_version: `v${V2}` });
  t.equal((await gateUpgrade(['dry-run'], env)).stdout.split('\n')[0], `an upgrade is available (${V1} -> ${V2})`);
  const deferred = await gateUpgrade(['run', '--now', OUTSIDE], env);
  t.equal(deferred.code, 3, deferred.stderr);
  t.equal(sh('dpkg-query', ['-W', '-f=${Version}', 'gate-mux']), V1, 'nothing installed outside the window');
  // ...inside it, the new version is installed from the repository and confirmed.
  const upgraded = await gateUpgrade(['run', '--now', INSIDE], env);
  t.equal(upgraded.code, 0, upgraded.stderr);
  t.match(upgraded.stdout, new RegExp(`upgraded ${V1.replaceAll('.', '\\.')} -> ${V2.replaceAll('.', '\\.')}`));
  t.equal(sh('dpkg-query', ['-W', '-f=${Version}', 'gate-mux']), V2);
  t.equal(sh('/usr/bin/gate-mux', ['--version'], false, env).trim(), V2);
  t.equal(sh('dpkg-query', ['-W', '-f=${Version}', 'gate-ent-updater']), updaterVersion, 'the updater package stays as installed');

  // A critical version installs at once, outside the window (here the channel goes back to V1).
  await moveChannel({ static_version: `v${V1}`, critical: true });
  const critical = await gateUpgrade(['run', '--now', OUTSIDE], env);
  t.equal(critical.code, 0, critical.stderr);
  t.match(critical.stdout, /the update is critical/);
  t.equal(sh('dpkg-query', ['-W', '-f=${Version}', 'gate-mux']), V1);
  t.equal(sh('/usr/bin/gate-mux', ['--version'], false, env).trim(), V1);
});

/** gate-upgrade as installed, as root with the test's apt configuration; stdout, stderr, exit code. */
async function gateUpgrade(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const lock = args[0] === 'run' ? ['--lock', join(env.APT_CONFIG!, '..', 'lock'), '--log-level', 'warn'] : [];
  const r = await runClient('/usr/bin/gate-upgrade', [...args, ...lock], { env, timeoutMs: 300_000 });
  return { code: r.code, stdout: r.stdout.toString(), stderr: r.stderr };
}

function arch(): string {
  return sh('dpkg', ['--print-architecture']).trim();
}

/** Runs a command to completion; its stdout, or (with `tolerate`) '' when it fails. */
function sh(command: string, args: string[], tolerate = false, env?: NodeJS.ProcessEnv, cwd?: string): string {
  try {
    return execFileSync(command, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(env ? { env } : {}),
      ...(cwd ? { cwd } : {}),
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    if (tolerate) return '';
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${command} ${args.join(' ')}: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}
