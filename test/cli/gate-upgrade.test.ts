// gate-upgrade run as an operator runs it (a child process), against a real GateProxy started from
// YAML (channels, a critical one, the cluster's maintenance schedule) and, when tinyproxy is
// installed (apt-get install tinyproxy), through it as HTTPS_PROXY. The install and version
// commands are small sh scripts written here that record what they were asked.
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { access, chmod, chown, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sealSchedule } from '../../lib/updater/schedule-seal.js';
import { runClient, type ClientResult } from '../helpers/clients.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { isRoot, systemUser } from '../helpers/system-user.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const BIN = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));
// 2026-08-02 is a Sunday; the schedule opens a window on Sundays at 02:00 UTC.
const INSIDE = '2026-08-02T02:30:00Z';
const OUTSIDE = '2026-08-02T05:00:00Z';
const SCHEDULE_YAML = 'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 2\n    weekdays: [Sunday]\n';

const gate = await startGateProxy(t, {
  mode: 'multiplex',
  upstreams: {},
  proxyService: {
    automatic_upgrades_channels: {
      'stable/cloud': { static_version: 'v1.2.4' },
      'stable/hot': { static_version: 'v1.2.5', critical: true },
      rollback: { static_version: 'v1.2.2' },
      rebuilt: { static_version: 'v1.2.3+build.9' },
    },
    cluster_maintenance_config: { agent_upgrades: { utc_start_hour: 2, weekdays: ['Sun'] } },
  },
});
const port = gate.port('multiplex');
const tiny = await startTinyproxy(t);
// Loopback targets are always dialled directly, whatever HTTPS_PROXY says. So, as
// test/interop/postgres.test.ts does, the proxy is addressed as 0.0.0.0:<port>: not a loopback name
// to the resolver, while Linux delivers a connection to 0.0.0.0 to this host's loopback, where the
// proxy listens. Its certificate names localhost, hence --server-name. Without tinyproxy (a
// developer machine; requirePeer has recorded the skip) the same runs go direct.
const proxyArgs = tiny
  ? ['--proxy', `https://0.0.0.0:${port}`, '--server-name', 'localhost', '--ca', gate.caFile]
  : ['--proxy', `https://127.0.0.1:${port}`, '--ca', gate.caFile];
// PATH and the proxy only, so the machine's proxy variables never leak in; tap's own variables
// (NODE_OPTIONS, _TAPJS_*) pass, so the children's coverage is counted.
const tapEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k === 'NODE_OPTIONS' || k.startsWith('_TAPJS_')));
const baseEnv = { ...tapEnv, PATH: process.env.PATH ?? '/usr/bin:/bin', ...(tiny ? { HTTPS_PROXY: tiny.url } : {}) };
const connects = (): number => (tiny ? tiny.output().split(`CONNECT 0.0.0.0:${port}`).length - 1 : 0);

// A root test hands the schedule file to `nobody` (an account every Debian system has); nothing on the machine
// outside the test's temp directory changes.
const nobody = isRoot() ? systemUser('nobody') : undefined;

interface Rig {
  dir: string;
  schedule: string;
  lock: string;
  /** The version the version script reports (what is "installed"). */
  setInstalled(version: string): Promise<void>;
  installed(): Promise<string>;
  /** One line per install, each argument in brackets. */
  installs(): Promise<string[]>;
  commands: string[];
}

/** A directory with the install and version scripts, an exported schedule, and a lock path. */
async function rig(t: Test): Promise<Rig> {
  const dir = await tempDir(t, 'gate-upgrade');
  const state = join(dir, 'installed');
  const log = join(dir, 'installs.log');
  const install = join(dir, 'install.sh');
  const version = join(dir, 'version.sh');
  // The install script records its arguments, then "installs" the version from its pkg= argument
  // (or $WRONG_VERSION), fails with $INSTALL_EXIT, and with $HOLD waits (bounded) for a go file.
  await writeFile(
    install,
    [
      '#!/bin/sh',
      `for a in "$@"; do printf '[%s]' "$a"; done >> '${log}'`,
      `echo >> '${log}'`,
      'if [ -n "$HOLD" ]; then',
      `  touch '${dir}/started'`,
      '  i=0',
      `  while [ ! -f '${dir}/go' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`,
      'fi',
      'if [ -n "$INSTALL_EXIT" ]; then echo "E: unable to fetch the package" >&2; exit "$INSTALL_EXIT"; fi',
      `case "$1" in pkg=*) echo "\${WRONG_VERSION:-\${1#pkg=}}" > '${state}';; esac`,
      '',
    ].join('\n'),
  );
  await writeFile(version, `#!/bin/sh\necho "gate-mux v$(cat '${state}') (test build)"\n`);
  await chmod(install, 0o755);
  await chmod(version, 0o755);
  const schedule = join(dir, 'schedule');
  await writeFile(schedule, SCHEDULE_YAML);
  await writeFile(log, '');
  return {
    dir,
    schedule,
    lock: join(dir, 'lock'),
    setInstalled: (v) => writeFile(state, `${v}\n`),
    installed: async () => (await readFile(state, 'utf8')).trim(),
    installs: async () => (await readFile(log, 'utf8')).split('\n').filter(Boolean),
    commands: ['--install-command', `${install} pkg={version} 'two words' --flag="{version} x"`, '--version-command', version],
  };
}

interface Outcome {
  code: number | null;
  stdout: string[];
  stderr: string;
}

function outcome(r: ClientResult): Outcome {
  return { code: r.code, stdout: r.stdout.toString('utf8').split('\n').filter(Boolean), stderr: r.stderr };
}

async function gateUpgrade(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Outcome> {
  return outcome(await runClient(process.execPath, [BIN, ...args], { env: { ...baseEnv, ...env }, timeoutMs: 60_000 }));
}

function dryRun(r: Rig, args: string[], env?: NodeJS.ProcessEnv): Promise<Outcome> {
  return gateUpgrade(['dry-run', ...proxyArgs, '--schedule', r.schedule, ...args], env);
}

function run(r: Rig, args: string[], env?: NodeJS.ProcessEnv): Promise<Outcome> {
  return gateUpgrade(['run', ...proxyArgs, '--schedule', r.schedule, '--lock', r.lock, ...r.commands, ...args], env);
}

/** The exit code, with the child's stderr shown only when it is not the expected one. */
function expectExit(t: Test, o: Outcome, code: number): void {
  t.equal(o.code, code, `exit ${code}`);
  if (o.code !== code) t.comment(o.stderr);
}

/** The JSON log lines a run wrote on stderr. */
function logLines(o: Outcome): Array<Record<string, unknown>> {
  return o.stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

// Many real processes (proxies, agents, the updater's runs): longer than tap's default per file
// on a busy machine.
t.setTimeout(300_000);

t.test('dry-run: equal, newer, lower (a downgrade line), build metadata', async (t) => {
  const r = await rig(t);
  const before = connects();
  const equal = await dryRun(r, ['--current', 'v1.2.3-interop', '--now', OUTSIDE]);
  expectExit(t, equal, 0);
  t.same(equal.stdout, [
    'no upgrades available (1.2.3-interop == 1.2.3-interop)',
    'next maintenance window starts 2026-08-09T02:00:00.000Z',
  ]);
  t.equal(equal.stderr, '', 'a valid schedule: no warning');
  if (tiny) t.equal(connects(), before + 2, 'version and critical both asked through tinyproxy');

  const newer = await dryRun(r, ['--channel', 'stable/cloud', '--current', '1.2.3', '--now', OUTSIDE]);
  t.same(newer.stdout, [
    'an upgrade is available (1.2.3 -> 1.2.4)',
    'next maintenance window starts 2026-08-09T02:00:00.000Z',
    'would wait (outside-window)',
  ]);

  const lower = await dryRun(r, ['--channel', 'rollback', '--current', '1.2.3', '--now', INSIDE]);
  t.same(lower.stdout, [
    'an upgrade is available (1.2.3 -> 1.2.2)',
    'this is a downgrade: the cluster serves 1.2.2, lower than 1.2.3',
    'inside the maintenance window (started 2026-08-02T02:00:00.000Z)',
    'would not downgrade (--allow-downgrade or updater.allow_downgrade: true follows the cluster down)',
  ]);
  const allowed = await dryRun(r, ['--channel', 'rollback', '--current', '1.2.3', '--now', INSIDE, '--allow-downgrade']);
  t.equal(allowed.stdout.at(-1), 'would upgrade now (in-window)', 'followed down when asked');
  const criticalLower = await dryRun(r, ['--channel', 'stable/hot', '--current', '1.3.0', '--now', OUTSIDE]);
  t.equal(
    criticalLower.stdout.at(-1),
    'would not downgrade (--allow-downgrade or updater.allow_downgrade: true follows the cluster down)',
    'a critical lower version is refused too',
  );

  const rebuilt = await dryRun(r, ['--channel', 'rebuilt', '--current', 'v1.2.3+build.8', '--now', INSIDE]);
  t.equal(rebuilt.stdout[0], 'no upgrades available (1.2.3 == 1.2.3)', 'another build of the same version is the same version');

  const critical = await dryRun(r, ['--channel', 'stable/hot', '--current', '1.2.3', '--now', OUTSIDE]);
  t.same(critical.stdout, [
    'an upgrade is available (1.2.3 -> 1.2.5)',
    'the update is critical: it does not wait for the maintenance window',
    'next maintenance window starts 2026-08-09T02:00:00.000Z',
    'would upgrade now (critical)',
  ]);
  t.same(await r.installs(), [], 'dry-run installs nothing');
});

t.test('run: regular outside the window is deferred (exit 3); inside it applies and checks the version', async (t) => {
  const r = await rig(t);
  await r.setInstalled('1.2.3');
  const deferred = await run(r, ['--channel', 'stable/cloud', '--now', OUTSIDE]);
  expectExit(t, deferred, 3);
  t.same(await r.installs(), [], 'nothing installed');
  const decided = logLines(deferred).find((l) => l.msg === 'decided: outside-window');
  t.match(
    decided,
    { current: '1.2.3', target: '1.2.4', critical: false, reason: 'outside-window', nextStart: '2026-08-09T02:00:00.000Z' },
    'the decision and why, logged',
  );

  const applied = await run(r, ['--channel', 'stable/cloud', '--now', INSIDE]);
  expectExit(t, applied, 0);
  t.same(applied.stdout.slice(-2), ['installing 1.2.4 (in-window)', 'upgraded 1.2.3 -> 1.2.4']);
  t.same(
    await r.installs(),
    ['[pkg=1.2.4][two words][--flag=1.2.4 x]'],
    'the version substituted in each word, words kept apart, no shell',
  );
  t.equal(await r.installed(), '1.2.4');
  t.ok(logLines(applied).some((l) => l.msg === 'upgraded' && l.to === '1.2.4'));
  await t.rejects(access(r.lock), 'the lock is released');

  const again = await run(r, ['--channel', 'stable/cloud', '--now', INSIDE]);
  t.equal(again.code, 0);
  t.equal(again.stdout[0], 'no upgrades available (1.2.4 == 1.2.4)', 'the current version comes from the version command');
  t.equal((await r.installs()).length, 1, 'nothing to do: nothing installed');
});

t.test('run: critical outside the window applies; a downgrade only when allowed', async (t) => {
  const r = await rig(t);
  await r.setInstalled('1.2.3');
  const critical = await run(r, ['--channel', 'stable/hot', '--now', OUTSIDE]);
  expectExit(t, critical, 0);
  t.same(await r.installs(), ['[pkg=1.2.5][two words][--flag=1.2.5 x]']);
  t.match(
    logLines(critical).find((l) => String(l.msg).startsWith('decided')),
    { reason: 'critical', critical: true },
  );

  const refused = await run(r, ['--channel', 'rollback', '--now', INSIDE]);
  t.equal(refused.code, 0, 'refusing a downgrade is nothing to do');
  t.equal((await r.installs()).length, 1);
  t.equal(await r.installed(), '1.2.5', 'not followed down by default');
  const down = await run(r, ['--channel', 'rollback', '--now', INSIDE, '--allow-downgrade']);
  expectExit(t, down, 0);
  t.equal(await r.installed(), '1.2.2', 'followed the cluster down when allowed');
});

t.test('run: a failing install command, a version check failing after the install', async (t) => {
  const r = await rig(t);
  await r.setInstalled('1.2.3');
  const failed = await run(r, ['--channel', 'stable/cloud', '--now', INSIDE], { INSTALL_EXIT: '100' });
  t.equal(failed.code, 1);
  t.match(failed.stderr, /GATE_ERR_UPGRADE_INSTALL_FAILED: install command exited with 100/);
  t.match(
    logLines(failed).find((l) => l.msg === 'install failed'),
    { stderr: /unable to fetch the package/ },
    'its stderr is logged',
  );
  t.equal(await r.installed(), '1.2.3');
  await t.rejects(access(r.lock), 'the lock is released after a failure too');

  const wrong = await run(r, ['--channel', 'stable/cloud', '--now', INSIDE], { WRONG_VERSION: '1.2.0' });
  t.equal(wrong.code, 1);
  t.match(wrong.stderr, /GATE_ERR_UPGRADE_VERIFY_FAILED: after the install \S+version\.sh reports 1\.2\.0, not 1\.2\.4/);

  const missing = await gateUpgrade([
    'run',
    ...proxyArgs,
    '--schedule',
    r.schedule,
    '--lock',
    r.lock,
    '--install-command',
    join(r.dir, 'nope'),
    '--version-command',
    r.commands[3]!,
    '--channel',
    'stable/cloud',
    '--now',
    INSIDE,
  ]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /GATE_ERR_UPGRADE_INSTALL_FAILED: install command could not start \(ENOENT\)/);
});

t.test('run: two overlapping runs never both install', async (t) => {
  const r = await rig(t);
  await r.setInstalled('1.2.3');
  const first = new Promise<Outcome>((resolve) => {
    const child = spawn(
      process.execPath,
      [BIN, 'run', ...proxyArgs, '--schedule', r.schedule, '--lock', r.lock, ...r.commands, '--channel', 'stable/hot'],
      {
        env: { ...baseEnv, HOLD: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('close', (code) => resolve({ code, stdout: stdout.split('\n').filter(Boolean), stderr }));
  });
  // Wait (bounded) until the first run is inside its install command, holding the lock.
  let started = false;
  for (let i = 0; i < 600 && !started; i++) {
    started = await access(join(r.dir, 'started')).then(
      () => true,
      () => false,
    );
    if (!started) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.ok(started, 'the first run reached its install command');
  const holder = (await readFile(r.lock, 'utf8')).split(' ')[0];
  const second = await run(r, ['--channel', 'stable/hot']);
  t.equal(second.code, 1);
  t.match(second.stderr, new RegExp(`GATE_ERR_UPGRADE_LOCKED: .*another gate-upgrade run \\(pid ${holder}\\) holds the lock`));
  await writeFile(join(r.dir, 'go'), '');
  const done = await first;
  expectExit(t, done, 0);
  t.same(await r.installs(), ['[pkg=1.2.5][two words][--flag=1.2.5 x]'], 'one install only');
});

t.test('schedule missing, invalid, without kind: a warning, regular updates deferred, critical ones applied', async (t) => {
  const r = await rig(t);
  await r.setInstalled('1.2.3');
  const cases: Array<[string, string | undefined, RegExp]> = [
    [
      'missing',
      undefined,
      /^warning: no maintenance schedule has been exported yet \(.*schedule-missing: ENOENT\): only critical updates would be applied$/m,
    ],
    [
      'invalid',
      'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 25\n',
      /^warning: no valid maintenance schedule has been exported yet \(.*spec\.agent_upgrades\.utc_start_hour: must be an integer hour from 0 to 23, got 25\): only critical/m,
    ],
    [
      'without kind',
      'spec:\n  agent_upgrades:\n    utc_start_hour: 2\n',
      /^warning: no valid maintenance schedule has been exported yet \(.*: kind: required: cluster_maintenance_config\)/m,
    ],
  ];
  for (const [name, text, warning] of cases) {
    const schedule = join(r.dir, `schedule-${name.replace(/ /g, '-')}`);
    if (text !== undefined) await writeFile(schedule, text);
    const regular = await run(r, ['--channel', 'stable/cloud', '--now', INSIDE, '--schedule', schedule]);
    t.equal(regular.code, 3, `${name}: deferred`);
    t.match(regular.stderr, warning, `${name}: warned`);
    t.equal(regular.stdout.at(-1), 'would wait (no-schedule)', name);
  }
  const critical = await run(r, ['--channel', 'stable/hot', '--now', INSIDE, '--schedule', join(r.dir, 'schedule-missing')]);
  t.equal(critical.code, 0, 'a critical update needs no schedule');
  t.same(await r.installs(), ['[pkg=1.2.5][two words][--flag=1.2.5 x]']);
});

t.test('only trustworthy answers: http:// refused unless asked for, an unknown CA refused', async (t) => {
  const r = await rig(t);
  const http = await gateUpgrade(['dry-run', '--proxy', `http://127.0.0.1:${port}`, '--schedule', r.schedule]);
  t.equal(http.code, 1);
  t.match(
    http.stderr,
    /GATE_ERR_UPGRADE_INSECURE: http:\/\/127\.0\.0\.1:\d+\/v1\/webapi\/automaticupgrades\/channel\/default\/version: refusing plain http/,
  );
  const allowed = await gateUpgrade([
    'dry-run',
    '--proxy',
    `http://127.0.0.1:${port}`,
    '--insecure-http',
    '--schedule',
    r.schedule,
    '--current',
    '1.2.3-interop',
  ]);
  expectExit(t, allowed, 0);
  t.equal(allowed.stdout[0], 'no upgrades available (1.2.3-interop == 1.2.3-interop)', 'the proxy answers plaintext HTTP on its one port');
  const unverified = await gateUpgrade(['dry-run', '--proxy', `https://127.0.0.1:${port}`, '--schedule', r.schedule]);
  t.equal(unverified.code, 1, 'the development CA is not in the trust store');
  t.match(unverified.stderr, /GATE_ERR_FETCH_FAILED: .*(self-signed|unable to verify|certificate)/i);
  const exportHttp = await gateUpgrade(['export-schedule', '--proxy', `http://127.0.0.1:${port}`, '--schedule', join(r.dir, 'x')]);
  t.equal(exportHttp.code, 1);
  t.match(exportHttp.stderr, /GATE_ERR_UPGRADE_INSECURE/);
  const unknown = await dryRun(r, ['--channel', 'beta']);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /GATE_ERR_UPGRADE_CHANNEL: channel beta at .* answered HTTP 404: no channel named "beta"/);
});

t.test('NO_PROXY keeps the updater off tinyproxy', { skip: tiny ? false : 'needs tinyproxy' }, async (t) => {
  const r = await rig(t);
  const before = connects();
  const direct = await dryRun(r, ['--current', '1.2.3-interop'], { NO_PROXY: '0.0.0.0' });
  expectExit(t, direct, 0);
  t.equal(connects(), before, 'tinyproxy saw no CONNECT');
});

t.test('export-schedule: writes the served schedule atomically, keeps owner and mode, honours GATE_UPGRADE_SCHEDULE', async (t) => {
  const r = await rig(t);
  const target = join(r.dir, 'etc', 'gate-upgrade.d', 'schedule');
  const first = await gateUpgrade(['export-schedule', ...proxyArgs], { GATE_UPGRADE_SCHEDULE: target });
  expectExit(t, first, 0);
  t.same(first.stdout, [`wrote the maintenance schedule to ${target}`]);
  t.equal(await readFile(target, 'utf8'), sealSchedule(SCHEDULE_YAML));
  t.equal((await stat(target)).mode & 0o777, 0o644, 'a new file is 0644');

  // An operator handed the file to the agent's user and tightened its mode: both survive.
  await writeFile(target, 'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 5\n');
  await chmod(target, 0o640);
  if (nobody) await chown(target, nobody.uid, nobody.gid);
  const before = await stat(target);
  const second = await gateUpgrade(['export-schedule', ...proxyArgs, '--schedule', target]);
  expectExit(t, second, 0);
  const after = await stat(target);
  t.equal(await readFile(target, 'utf8'), sealSchedule(SCHEDULE_YAML), 'replaced');
  t.not(after.ino, before.ino, 'a new file renamed into place, not rewritten in place');
  t.equal(after.mode & 0o777, 0o640, 'mode kept');
  t.same([after.uid, after.gid], [before.uid, before.gid], nobody ? 'owner kept (nobody)' : 'owner kept');
  const same = await gateUpgrade(['export-schedule', ...proxyArgs, '--schedule', target]);
  t.same(same.stdout, [`the maintenance schedule in ${target} is up to date`]);
  t.equal((await stat(target)).ino, after.ino, 'unchanged: not touched');

  const dry = await gateUpgrade(['dry-run', ...proxyArgs, '--current', '1.2.3-interop', '--now', INSIDE], {
    GATE_UPGRADE_SCHEDULE: target,
  });
  t.equal(dry.stderr, '', 'the exported schedule is read where it was written');
  t.equal(dry.stdout.at(-1), 'inside the maintenance window (started 2026-08-02T02:00:00.000Z)');
});

// This Node must be one that user can run (one under /root, as .ci/node-bin installs, is not).
const nobodyRunsNode =
  nobody !== undefined && spawnSync(process.execPath, ['--version'], { uid: nobody.uid, gid: nobody.gid, env: {} }).status === 0;
const asUser = !nobody
  ? 'needs root and the nobody account, to give the file to another user and run export-schedule as that user'
  : !nobodyRunsNode
    ? `nobody cannot run this Node (${process.execPath}); the run on the machine's Node covers it`
    : false;
t.test(
  "export-schedule as a non-root agent's user who owns the file but not its directory: rewritten in place",
  { skip: asUser },
  async (t) => {
    if (!nobody) return;
    const r = await rig(t);
    await chmod(r.dir, 0o755); // others may pass through, as through /etc
    const dir = join(r.dir, 'gate-upgrade.d');
    await mkdir(dir, { mode: 0o755 }); // root's, as /etc/gate-upgrade.d is
    const target = join(dir, 'schedule');
    await writeFile(target, '');
    await chown(target, nobody.uid, nobody.gid);
    const before = await stat(target);
    // The proxy's CA where that user can read it.
    const ca = join(r.dir, 'ca.pem');
    await writeFile(ca, gate.ca, { mode: 0o644 });
    const args = [...proxyArgs.slice(0, -1), ca];
    // As that user, without tap's coverage hooks (env -u: tap adds them to every child's NODE_OPTIONS,
    // and their files are root's).
    const asNobody = async (): Promise<Outcome> =>
      outcome(
        await runClient('env', ['-u', 'NODE_OPTIONS', process.execPath, BIN, 'export-schedule', ...args, '--schedule', target], {
          env: { PATH: baseEnv.PATH, ...(tiny ? { HTTPS_PROXY: tiny.url } : {}) },
          uid: nobody.uid,
          gid: nobody.gid,
          timeoutMs: 60_000,
        }),
      );
    const first = await asNobody();
    expectExit(t, first, 0);
    t.same(first.stdout, [`wrote the maintenance schedule to ${target} (in place: this user may not create files in its directory)`]);
    const after = await stat(target);
    t.equal(after.ino, before.ino, 'the same file, rewritten');
    t.same([after.uid, after.gid], [nobody.uid, nobody.gid], "still the agent user's");
    t.equal(await readFile(target, 'utf8'), sealSchedule(SCHEDULE_YAML));
    const dry = await gateUpgrade(['dry-run', ...proxyArgs, '--current', '1.2.3-interop', '--now', INSIDE, '--schedule', target]);
    t.equal(dry.stderr, '', 'read back as a valid schedule');
    // A shorter old schedule with another window, and a longer one, both replaced whole.
    await writeFile(
      target,
      sealSchedule(
        'kind: cluster_maintenance_config\nspec:\n  agent_upgrades:\n    utc_start_hour: 9\n    weekdays: [Monday, Tuesday, Wednesday, Thursday, Friday, Saturday]\n# a long trailing comment that makes this file longer than the one the proxy serves\n',
      ),
    );
    expectExit(t, await asNobody(), 0);
    t.equal(await readFile(target, 'utf8'), sealSchedule(SCHEDULE_YAML), 'cut to the new length');
    t.same((await asNobody()).stdout, [`the maintenance schedule in ${target} is up to date`]);
    // Without the file (nothing the user owns) it still fails, naming the directory's refusal.
    await rm(target);
    const missing = await asNobody();
    t.equal(missing.code, 1);
    t.match(missing.stderr, /GATE_ERR_UPGRADE_SCHEDULE_WRITE: .*cannot create a temporary file beside it: EACCES/);
  },
);

t.test('export-schedule: a proxy without a schedule leaves the file alone', async (t) => {
  const bare = await startGateProxy(t, { mode: 'multiplex', upstreams: {} });
  const r = await rig(t);
  const none = await gateUpgrade([
    'export-schedule',
    '--proxy',
    `https://127.0.0.1:${bare.port('multiplex')}`,
    '--ca',
    bare.caFile,
    '--schedule',
    r.schedule,
  ]);
  t.equal(none.code, 1);
  t.match(
    none.stderr,
    /GATE_ERR_UPGRADE_SCHEDULE_UNAVAILABLE: the maintenance schedule at .* answered HTTP 404: this proxy has no cluster_maintenance_config/,
  );
  t.equal(await readFile(r.schedule, 'utf8'), SCHEDULE_YAML, 'the old schedule is kept');
});

t.test('usage: --help for each command, exit 2 for mistakes', async (t) => {
  const top = await gateUpgrade(['--help']);
  t.equal(top.code, 0);
  t.match(top.stdout.join('\n'), /dry-run .*\n.*run .*\n.*export-schedule/);
  for (const command of ['dry-run', 'run', 'export-schedule']) {
    const help = await gateUpgrade([command, '--help']);
    t.equal(help.code, 0, command);
    t.match(help.stdout[0], new RegExp(`^usage: gate-upgrade ${command} `), command);
  }
  t.match((await gateUpgrade(['run', '--help'])).stdout.join('\n'), /Exit 0: nothing to do, or done; 1: failed .*; 3: deferred/s);
  t.equal((await gateUpgrade([])).code, 2);
  t.equal((await gateUpgrade(['upgrade-now'])).code, 2);
  // Without --proxy the agent's file is read: one that is not there is named (not the machine's
  // /etc/gate/agent.yaml, which the machine test may be installing meanwhile).
  const noFile = await gateUpgrade(['dry-run', '--config', '/nonexistent/agent.yaml']);
  t.equal(noFile.code, 1);
  t.match(
    noFile.stderr,
    /GATE_ERR_CONFIG_INVALID: invalid configuration \/nonexistent\/agent.yaml:\n {2}\(file\): cannot read the file: ENOENT/,
  );
  t.equal((await gateUpgrade(['dry-run', '--proxy', 'https://x', '--bogus'])).code, 2);
  const noInstall = await gateUpgrade(['run', '--proxy', 'https://x', '--version-command', 'true']);
  t.equal(noInstall.code, 2);
  t.match(noInstall.stderr, /no way to install: give --install-command and --version-command, or updater.package_manager/);
  const badQuote = await gateUpgrade([
    'run',
    '--proxy',
    'https://x',
    '--install-command',
    "apt-get install 'gate",
    '--version-command',
    'true',
  ]);
  t.equal(badQuote.code, 1);
  t.match(badQuote.stderr, /GATE_ERR_INVALID_ARGUMENT: unterminated '/);
});
