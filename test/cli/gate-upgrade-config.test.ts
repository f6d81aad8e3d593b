// gate-upgrade as the platform's document writes it: no flags, everything from the agent's file
// (the proxy, the cluster CA in its state directory, the channel, how to install). The proxy is a
// real GateProxy reached through a real tinyproxy given by HTTP_PROXY alone (the platform's rule
// for services that dial back: HTTPS_PROXY, else HTTP_PROXY). A proxy that serves only /version
// (no /critical) is a plain HTTP server here.
import t from 'tap';
import { chmod, mkdir, copyFile, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  packageManagerMethod,
  packageVersionOf,
  versionOfPackage,
  detectPackageManager,
  commandMethod,
} from '../../lib/updater/install-method.js';
import { runClient } from '../helpers/clients.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { closeServer, listening } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startTinyproxy } from '../helpers/tinyproxy.js';

const BIN = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));
const INSIDE = '2026-08-02T02:30:00Z';
const OUTSIDE = '2026-08-02T05:00:00Z';
const tapEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k === 'NODE_OPTIONS' || k.startsWith('_TAPJS_')));

async function gateUpgrade(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const r = await runClient(process.execPath, [BIN, ...args], {
    env: { ...tapEnv, PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    timeoutMs: 60_000,
  });
  return { code: r.code, stdout: r.stdout.toString('utf8'), stderr: r.stderr };
}

/** An agent "installed" by scripts: the version file they read and write, and its configuration file. */
async function agentFiles(
  dir: string,
  yaml: (scripts: { install: string; version: string }) => string,
): Promise<{ config: string; installed: () => Promise<string> }> {
  const state = join(dir, 'installed');
  await writeFile(state, '1.2.3\n');
  const install = join(dir, 'install.sh');
  const version = join(dir, 'version.sh');
  await writeFile(install, `#!/bin/sh\necho "$1" > '${state}'\n`);
  await writeFile(version, `#!/bin/sh\necho "gate-mux $(cat '${state}')"\n`);
  await chmod(install, 0o755);
  await chmod(version, 0o755);
  const config = join(dir, 'agent.yaml');
  await writeFile(config, yaml({ install, version }));
  return { config, installed: async () => (await readFile(state, 'utf8')).trim() };
}

t.test('no flags but the file: proxy, cluster CA, channel and install command from agent.yaml, through HTTP_PROXY alone', async (t) => {
  const tiny = await startTinyproxy(t);
  if (!tiny) return;
  const gate = await startGateProxy(t, {
    mode: 'multiplex',
    upstreams: {},
    proxyService: {
      automatic_upgrades_channels: { 'stable/cloud': { static_version: 'v1.2.4' }, rollback: { static_version: 'v1.2.2' } },
      cluster_maintenance_config: { agent_upgrades: { utc_start_hour: 2, weekdays: ['Sun'] } },
    },
  });
  const dir = await tempDir(t, 'upgrade-config');
  // A joined agent's state directory holds the cluster CA.
  await mkdir(join(dir, 'state'), { mode: 0o700 });
  await copyFile(gate.caFile, join(dir, 'state', 'ca.pem'));
  // 0.0.0.0 is not loopback to the proxy rules (loopback is always direct), but Linux delivers it to
  // the loopback interface where the proxy listens; its certificate names localhost.
  const agent = await agentFiles(dir, (s) =>
    [
      `proxy: 0.0.0.0:${gate.port('multiplex')}`,
      'server_name: localhost',
      'name: updater-test',
      `state_dir: ${join(dir, 'state')}`,
      'allow: [10.0.0.1:22]',
      'updater:',
      '  channel: stable/cloud',
      `  install_command: ${s.install} {version}`,
      `  version_command: ${s.version}`,
      '',
    ].join('\n'),
  );
  const schedule = join(dir, 'schedule');
  const env = { HTTP_PROXY: tiny.url, GATE_UPGRADE_SCHEDULE: schedule };
  const connects = (): number => tiny.output().split(`CONNECT 0.0.0.0:${gate.port('multiplex')}`).length - 1;

  const exported = await gateUpgrade(['export-schedule', '--config', agent.config], env);
  t.equal(exported.code, 0, exported.stderr);
  t.match(await readFile(schedule, 'utf8'), /utc_start_hour: 2/);
  const dry = await gateUpgrade(['dry-run', '--config', agent.config, '--now', OUTSIDE], env);
  t.equal(dry.code, 0, dry.stderr);
  t.equal(dry.stdout.split('\n')[0], 'an upgrade is available (1.2.3 -> 1.2.4)', "the file's channel, the version its command reports");
  t.equal(dry.stderr, '', 'no warning: the schedule is there and the proxy serves /critical');
  t.ok(connects() >= 3, `every request went through tinyproxy given by HTTP_PROXY alone (${connects()} CONNECTs)`);

  const deferred = await gateUpgrade(
    ['run', '--config', agent.config, '--now', OUTSIDE, '--lock', join(dir, 'lock'), '--log-level', 'silent'],
    env,
  );
  t.equal(deferred.code, 3, deferred.stderr);
  t.equal(await agent.installed(), '1.2.3');
  const done = await gateUpgrade(
    ['run', '--config', agent.config, '--now', INSIDE, '--lock', join(dir, 'lock'), '--log-level', 'silent'],
    env,
  );
  t.equal(done.code, 0, done.stderr);
  t.match(done.stdout, /upgraded 1\.2\.3 -> 1\.2\.4/);
  t.equal(await agent.installed(), '1.2.4');
  const again = await gateUpgrade(['dry-run', '--config', agent.config], env);
  t.equal(again.stdout.split('\n')[0], 'no upgrades available (1.2.4 == 1.2.4)');

  // A lower version is refused unless the file's updater.allow_downgrade says otherwise.
  const down = await gateUpgrade(['dry-run', '--config', agent.config, '--channel', 'rollback', '--now', INSIDE], env);
  t.match(down.stdout.trim().split('\n').at(-1), /^would not downgrade /, 'a downgrade refused by default');
  const allowing = join(dir, 'allowing.yaml');
  await writeFile(allowing, (await readFile(agent.config, 'utf8')).replace('updater:\n', 'updater:\n  allow_downgrade: true\n'));
  const allowed = await gateUpgrade(['dry-run', '--config', allowing, '--channel', 'rollback', '--now', INSIDE], env);
  t.equal(allowed.stdout.trim().split('\n').at(-1), 'would upgrade now (in-window)', 'followed down with updater.allow_downgrade: true');

  // Before the agent has joined there is no cluster CA to trust the proxy by.
  const unjoined = join(dir, 'unjoined.yaml');
  await writeFile(
    unjoined,
    (await readFile(agent.config, 'utf8')).replace(`state_dir: ${join(dir, 'state')}`, `state_dir: ${join(dir, 'nothing')}`),
  );
  const noCa = await gateUpgrade(['dry-run', '--config', unjoined], env);
  t.equal(noCa.code, 1);
  t.match(noCa.stderr, /GATE_ERR_AGENT_STATE: .*nothing\/ca\.pem: ENOENT: the agent has not joined yet/);
});

t.test('a proxy that serves only /version: /critical answering 404 is "not critical", one warning', async (t) => {
  const server = createServer((req, res) => {
    if (req.url === '/v1/webapi/automaticupgrades/channel/default/version') res.end('v1.2.4\n');
    else {
      res.statusCode = 404;
      res.end('not found');
    }
  });
  const port = await listening(server);
  t.teardown(() => closeServer(server));
  const dir = await tempDir(t, 'upgrade-404');
  const agent = await agentFiles(dir, (s) =>
    [
      'proxy: 127.0.0.1:1',
      'name: a',
      'allow: [10.0.0.1:22]',
      'updater:',
      `  install_command: ${s.install} {version}`,
      `  version_command: ${s.version}`,
      '',
    ].join('\n'),
  );
  const env = { GATE_UPGRADE_SCHEDULE: join(dir, 'no-schedule') };
  const dry = await gateUpgrade(['dry-run', '--config', agent.config, '--proxy', `http://127.0.0.1:${port}`, '--insecure-http'], env);
  t.equal(dry.code, 0, dry.stderr);
  t.equal(dry.stdout.split('\n')[0], 'an upgrade is available (1.2.3 -> 1.2.4)', 'the default channel');
  const warnings = dry.stderr.split('\n').filter((l) => l.startsWith('warning:'));
  t.equal(warnings.filter((l) => /whether its version is critical/.test(l)).length, 1, dry.stderr);
  t.match(dry.stderr, /warning: channel default does not say whether its version is critical \(HTTP 404\): taken as not critical/);
  // Not critical: with no schedule a run waits (exit 3) instead of installing.
  const run = await gateUpgrade(
    [
      'run',
      '--config',
      agent.config,
      '--proxy',
      `http://127.0.0.1:${port}`,
      '--insecure-http',
      '--lock',
      join(dir, 'lock'),
      '--log-level',
      'silent',
    ],
    env,
  );
  t.equal(run.code, 3, run.stderr);
  t.equal(await agent.installed(), '1.2.3');
});

t.test('updater.package_manager: apt, run as gate-upgrade runs it, against stand-in apt-get, dpkg-query and gate-mux', async (t) => {
  // The real apt runs in test/system/ (CI only); here scripts named like the programs record what
  // they are asked, so the commands, their order, their environment and both checks are seen.
  const server = createServer((req, res) => {
    if (req.url === '/v1/webapi/automaticupgrades/channel/default/version') res.end('v1.2.5-rc.1\n');
    else if (req.url === '/v1/webapi/automaticupgrades/channel/default/critical') res.end('yes\n');
    else {
      res.statusCode = 404;
      res.end();
    }
  });
  const port = await listening(server);
  t.teardown(() => closeServer(server));
  const dir = await tempDir(t, 'upgrade-apt');
  const bin = join(dir, 'bin');
  await mkdir(bin);
  const db = join(dir, 'dpkg-version');
  const program = join(dir, 'program-version');
  const log = join(dir, 'calls');
  await writeFile(db, '1.2.4\n');
  await writeFile(program, '1.2.4\n');
  const script = (body: string): string => `#!/bin/sh\necho "$(basename "$0") $* [$DEBIAN_FRONTEND]" >> '${log}'\n${body}\n`;
  // apt-get install writes the package version (1.2.5~rc.1) to the database; the program reports
  // what $PROGRAM_LAGS says, else the same.
  await writeFile(
    join(bin, 'apt-get'),
    script(
      `case "$1" in install) for a in "$@"; do case "$a" in gate-mux=*) echo "\${a#gate-mux=}" > '${db}'; echo "\${PROGRAM_LAGS:-\${a#gate-mux=}}" | tr '~' '-' > '${program}';; esac; done;; esac`,
    ),
    { mode: 0o755 },
  );
  await writeFile(join(bin, 'dpkg-query'), script(`cat '${db}' | tr -d '\\n'`), { mode: 0o755 });
  await writeFile(join(bin, 'gate-mux'), script(`echo "$(cat '${program}')"`), { mode: 0o755 });
  const config = join(dir, 'agent.yaml');
  await writeFile(config, 'proxy: 127.0.0.1:1\nname: a\nallow: [10.0.0.1:22]\nupdater:\n  package_manager: apt\n');
  const args = [
    'run',
    '--config',
    config,
    '--proxy',
    `http://127.0.0.1:${port}`,
    '--insecure-http',
    '--lock',
    join(dir, 'lock'),
    '--log-level',
    'silent',
  ];
  const env = { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`, GATE_UPGRADE_SCHEDULE: join(dir, 'none') };

  const done = await gateUpgrade(args, env);
  t.equal(done.code, 0, done.stderr);
  t.match(done.stdout, /^an upgrade is available \(1\.2\.4 -> 1\.2\.5-rc\.1\)\n/, 'the running version from the package database');
  t.match(done.stdout, /upgraded 1\.2\.4 -> 1\.2\.5-rc\.1/);
  const calls = (await readFile(log, 'utf8')).trim().split('\n');
  t.same(
    calls,
    [
      'dpkg-query -W -f=${Version} gate-mux [noninteractive]',
      'apt-get update -q [noninteractive]',
      'apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold gate-mux=1.2.5~rc.1 [noninteractive]',
      'dpkg-query -W -f=${Version} gate-mux [noninteractive]',
      'gate-mux --version [noninteractive]',
    ],
    'the database first, then update, install at the package version, and both checks',
  );

  // The package database says the target, the program does not (it still runs the old code): failed.
  await writeFile(db, '1.2.4\n');
  await writeFile(program, '1.2.4\n');
  const lagging = await gateUpgrade(args, { ...env, PROGRAM_LAGS: '1.2.4' });
  t.equal(lagging.code, 1);
  t.match(lagging.stderr, /GATE_ERR_UPGRADE_VERIFY_FAILED: after the install gate-mux --version reports 1\.2\.4, not 1\.2\.5-rc\.1/);
  // No package manager named and none on PATH: the run says what to give.
  const bare = join(dir, 'bare.yaml');
  await writeFile(bare, 'proxy: 127.0.0.1:1\nname: a\nallow: [10.0.0.1:22]\n');
  const none = await gateUpgrade(
    ['run', '--config', bare, '--proxy', `http://127.0.0.1:${port}`, '--insecure-http', '--lock', join(dir, 'lock')],
    { PATH: join(dir, 'empty') },
  );
  t.equal(none.code, 2);
  t.match(none.stderr, /no way to install: give --install-command and --version-command, or updater.package_manager/);
});

t.test("install methods: package managers, package versions, the machine's own", async (t) => {
  t.equal(packageVersionOf('1.2.4'), '1.2.4');
  t.equal(packageVersionOf('1.2.4-rc.1'), '1.2.4~rc.1', 'a pre-release sorts before its release in dpkg and rpm');
  t.equal(versionOfPackage('1.2.4~rc.1'), '1.2.4-rc.1');
  const apt = packageManagerMethod('apt');
  t.same(apt.install('1.2.4-rc.1').at(-1)!.at(-1), 'gate-mux=1.2.4~rc.1');
  t.same(apt.install('1.2.4')[0], ['apt-get', 'update', '-q']);
  t.ok(apt.install('1.2.4')[1]!.includes('--allow-downgrades'));
  t.same(
    apt.versionCommands,
    [
      ['dpkg-query', '-W', '-f=${Version}', 'gate-mux'],
      ['gate-mux', '--version'],
    ],
    'the package database, then the program',
  );
  t.equal(apt.env.DEBIAN_FRONTEND, 'noninteractive');
  t.same(packageManagerMethod('dnf').install('1.2.4'), [['dnf', 'install', '-y', '--refresh', 'gate-mux-1.2.4']]);
  t.same(packageManagerMethod('yum').install('1.2.4'), [['yum', 'install', '-y', '--refresh', 'gate-mux-1.2.4']]);
  t.same(packageManagerMethod('zypper').install('1.2.4').at(-1), [
    'zypper',
    '--non-interactive',
    'install',
    '--oldpackage',
    'gate-mux=1.2.4',
  ]);
  t.same(packageManagerMethod('zypper').versionCommands[0], ['rpm', '-q', '--qf', '%{VERSION}', 'gate-mux']);
  t.equal(
    detectPackageManager((p) => ['apt-get', 'dpkg-query', 'zypper'].includes(p)),
    'apt',
  );
  t.equal(
    detectPackageManager((p) => p === 'zypper'),
    'zypper',
  );
  t.equal(
    detectPackageManager((p) => p === 'yum'),
    'yum',
  );
  t.equal(
    detectPackageManager(() => false),
    undefined,
  );
  t.same(commandMethod("/opt/install 'a b' v={version}", [['true']]).install('1.2.4'), [['/opt/install', 'a b', 'v=1.2.4']]);
  t.throws(() => commandMethod("/opt/install 'a", [['true']]), { code: 'GATE_ERR_INVALID_ARGUMENT' });
});
