// gate-upgrade under a cluster's rollout, as an operator runs it (child processes):
// - against a tiny real HTTP server on loopback answering `/v1/webapi/find` as the contract says
//   (docs/updates.md), the lines dry-run prints and what run does for each answer, and the
//   channel as before when the proxy has no rollout (404, or `managed: false`);
// - the health check with real processes: a `gate-mux proxy` built as 3.1.0 and a `gate-mux agent`
//   whose "install" (a sh script) stops it and starts another build of the package (3.2.0, or a
//   3.3.0 that cannot start). 3.2.0 comes back ready; 3.3.0 does not, so the updater reinstalls
//   3.2.0, waits for it, fails with GATE_ERR_UPGRADE_UNHEALTHY and records the revert, which the
//   agent then reports in its self-description.
import t from 'tap';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InventoryRow } from '../../lib/cluster/inventory.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { serverIdForName } from '../../lib/tunnel/server-id.js';
import { readReadiness } from '../../lib/updater/agent-readiness.js';
import { readLastUpdate } from '../../lib/updater/last-update.js';
import { freePort } from '../helpers/daemon.js';
import { managed, startFindServer } from '../helpers/find-server.js';
import { run, until } from '../helpers/net.js';
import { startProxyCommand } from '../helpers/proxy-command.js';
import { tempDir } from '../helpers/temp-dir.js';
import { versionedBuild } from '../helpers/versioned-build.js';

const BIN = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

async function gateUpgrade(args: string[], extraEnv: NodeJS.ProcessEnv = {}) {
  const r = await run(process.execPath, [BIN, ...args], { env: { ...env, ...extraEnv }, timeoutMs: 90_000 });
  return { code: r.code, stdout: r.stdout.split('\n').filter(Boolean), stderr: r.stderr };
}

// Many real processes (proxies, agents, the updater's runs): longer than tap's default per file
// on a busy machine.
t.setTimeout(300_000);

t.test('dry-run and run ask the rollout first, and the channel when there is none', async (t) => {
  const server = await startFindServer(t);
  const dir = await tempDir(t, 'rollout-dry-run');
  const base = ['--proxy', server.url, '--insecure-http', '--current', '1.2.3', '--schedule', join(dir, 'no-schedule')];
  const agent = ['--name', 'a1', '--group', 'dev'];
  const findFor = `/v1/webapi/find?host=${serverIdForName('a1')}&group=dev`;

  const noName = await gateUpgrade(['dry-run', ...base]);
  t.equal(noName.code, 0);
  t.equal(noName.stdout[0], 'no upgrades available (1.2.3 == 1.2.3)');
  t.notOk(
    server.requests.some((r) => r.startsWith('/v1/webapi/find')),
    'without an agent name there is no agent to ask about: the channel alone',
  );

  const older = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.equal(older.code, 0, 'a proxy without find (404): the channel');
  t.equal(older.stdout[0], 'no upgrades available (1.2.3 == 1.2.3)');
  t.same(server.requests.slice(-3), [
    findFor,
    '/v1/webapi/automaticupgrades/channel/default/version',
    '/v1/webapi/automaticupgrades/channel/default/critical',
  ]);

  server.find = { status: 200, body: '{"auto_update":{"managed":false}}' };
  server.channelVersion = 'v1.2.4';
  const unmanaged = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.same(unmanaged.stdout, ['an upgrade is available (1.2.3 -> 1.2.4)', 'would wait (no-schedule)'], 'no rollout configured: the channel');

  server.find = managed('1.2.3', false, 'waiting for group dev');
  const notReached = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.equal(notReached.code, 0);
  t.same(notReached.stdout, ['no upgrades available (1.2.3 == 1.2.3)', 'waiting for group dev'], "the document's first line, then why");
  t.equal(server.requests.at(-1), findFor, 'the channel is not asked under a rollout');
  t.equal(notReached.stderr, '', 'no schedule warning: the window does not gate a managed update');

  server.find = managed('1.3.0', true, 'canary of group dev');
  const told = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.same(told.stdout, ['an upgrade is available (1.2.3 -> 1.3.0)', 'canary of group dev', 'would upgrade now (rollout)']);

  server.find = managed('1.3.0', false, 'halted: canary a2 came back on 1.2.3');
  const halted = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.same(halted.stdout, ['an upgrade is available (1.2.3 -> 1.3.0)', 'halted: canary a2 came back on 1.2.3', 'would wait (rollout-wait)']);
  const installs = join(dir, 'installs');
  await writeFile(join(dir, 'install.sh'), `#!/bin/sh\necho "$1" >> '${installs}'\n`);
  await chmod(join(dir, 'install.sh'), 0o755);
  const waiting = await gateUpgrade([
    'run',
    ...base,
    ...agent,
    '--install-command',
    `${join(dir, 'install.sh')} {version}`,
    '--version-command',
    'echo 1.2.3',
    '--lock',
    join(dir, 'lock'),
    '--log-level',
    'silent',
  ]);
  t.equal(waiting.code, 3, 'run: deferred while the rollout has not reached this agent');
  await t.rejects(readFile(installs), { code: 'ENOENT' }, 'nothing installed');

  server.find = managed('1.2.2', true, 'rolled back');
  const down = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.same(
    down.stdout,
    [
      'an upgrade is available (1.2.3 -> 1.2.2)',
      'rolled back',
      'this is a downgrade: the rollout gives 1.2.2, lower than 1.2.3',
      'would not downgrade (--allow-downgrade or updater.allow_downgrade: true follows the cluster down)',
    ],
    'a rollout moving down needs the same permission as a channel',
  );

  server.find = { status: 400, body: '{"error":{"code":"GATE_ERR_INVALID_ARGUMENT","message":"group: not a group name"}}' };
  const refused = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, 'GATE_ERR_UPGRADE_FIND');
  t.match(refused.stderr, 'group: not a group name');
  server.find = { status: 200, body: '{"auto_update":{"managed":true,"agent_version":"latest","agent_auto_update":true}}' };
  const garbled = await gateUpgrade(['dry-run', ...base, ...agent]);
  t.equal(garbled.code, 1, 'an answer that is not the contract is never guessed at');
  t.match(garbled.stderr, /GATE_ERR_UPGRADE_FIND: .*"latest" is not a version/);
});

t.test('health check: a good version stays, one that cannot start is reverted and reported', async (t) => {
  const builds = Object.fromEntries(
    await Promise.all(['3.1.0', '3.2.0', '3.3.0'].map(async (v) => [v, await versionedBuild(t, v)] as const)),
  ) as Record<string, string>;
  // 3.3.0 cannot start: its program exits at once, as a build with a broken dependency would.
  await writeFile(builds['3.3.0']!, "console.error('gate-mux 3.3.0: cannot start'); process.exit(1);\n");

  const dir = await tempDir(t, 'rollout-health');
  const diagPort = await freePort('127.0.0.1');
  const config = join(dir, 'gate.yaml');
  await writeFile(
    config,
    `version: v3\ndata_dir: ${join(dir, 'data')}\ndiag_addr: 127.0.0.1:${diagPort}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n`,
  );
  const proxy = await startProxyCommand(t, ['--config', config], dir, { script: builds['3.1.0'] });
  const address = /listening on (\S+) \(multiplex:/.exec(proxy.output())![1]!;
  const ca = await readFile(join(dir, 'data', 'ca.pem'), 'utf8');
  const token = (await readFile(join(dir, 'data', 'join-token'), 'utf8')).trim();
  const state = join(dir, 'agent-state');

  // The "package": install.sh VERSION stops the running agent (SIGTERM, bounded wait), records
  // the version, and starts that build's agent in the background with its output in a file (so
  // the install command ends while the agent runs on, as a package's postinst restarting a unit).
  const install = join(dir, 'install.sh');
  const pidFile = join(dir, 'agent.pid');
  await writeFile(
    install,
    [
      '#!/bin/sh',
      `echo "$1" >> '${dir}/installs.log'`,
      'case "$1" in',
      ...Object.entries(builds).map(([v, script]) => `  ${v}) script='${script}' ;;`),
      '  *) echo "no package $1" >&2; exit 1 ;;',
      'esac',
      `if [ -f '${pidFile}' ]; then`,
      `  pid=$(cat '${pidFile}'); kill "$pid" 2>/dev/null; i=0`,
      '  while kill -0 "$pid" 2>/dev/null && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done',
      'fi',
      `echo "$1" > '${dir}/installed'`,
      `nohup '${process.execPath}' "$script" agent --proxy ${address} --server-name localhost --name a1 --state-dir '${state}' --token ${token} --ca-pin ${caPin(ca)} --allow 127.0.0.1:9 >> '${dir}/agent.log' 2>&1 < /dev/null &`,
      `echo $! > '${pidFile}'`,
      '',
    ].join('\n'),
  );
  await chmod(install, 0o755);
  t.teardown(async () => {
    const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  // What the cluster sees: the proxy's inventory, where the agent's self-description lands.
  const row = async (): Promise<InventoryRow | undefined> => {
    const r = await run(process.execPath, [builds['3.1.0']!, 'inventory', 'ls', '--format', 'json', '--diag', `127.0.0.1:${diagPort}`], {
      env,
    });
    if (r.code !== 0) throw new Error(r.stderr);
    return (JSON.parse(r.stdout) as InventoryRow[]).find((x) => x.agent === 'a1');
  };
  const installs = async () => (await readFile(join(dir, 'installs.log'), 'utf8')).split('\n').filter(Boolean);

  // 3.1.0 runs and has reported itself ready once: the health check applies from now on.
  t.equal((await run(install, ['3.1.0'], { env })).code, 0);
  await until(async () => (await readReadiness(state))?.tunnelUp === true, 'the 3.1.0 agent up and ready', 30_000);
  t.equal((await readReadiness(state))!.version, '3.1.0');

  const server = await startFindServer(t);
  const upgrade = (extra: string[] = []) =>
    gateUpgrade([
      'run',
      '--proxy',
      server.url,
      '--insecure-http',
      '--name',
      'a1',
      '--group',
      'dev',
      '--state-dir',
      state,
      '--install-command',
      `${install} {version}`,
      '--version-command',
      `cat ${join(dir, 'installed')}`,
      '--lock',
      join(dir, 'lock'),
      '--log-level',
      'silent',
      ...extra,
    ]);

  server.find = managed('3.2.0', true, 'canary of group dev');
  const good = await upgrade();
  t.equal(good.code, 0, 'installed and ready');
  if (good.code !== 0) t.comment(good.stderr, await readFile(join(dir, 'agent.log'), 'utf8'));
  t.same(good.stdout, [
    'an upgrade is available (3.1.0 -> 3.2.0)',
    'canary of group dev',
    'would upgrade now (rollout)',
    'installing 3.2.0 (rollout)',
    'the agent is ready on 3.2.0',
    'upgraded 3.1.0 -> 3.2.0',
  ]);
  t.match(await readLastUpdate(state), { from: '3.1.0', to: '3.2.0', outcome: 'installed', reason: 'ready' });
  const readyOn32 = (await readReadiness(state))!;
  await until(async () => (await row())?.last_update?.outcome === 'installed', 'the inventory shows the install', 20_000);
  t.match(await row(), { version: '3.2.0', last_update: { from: '3.1.0', to: '3.2.0', outcome: 'installed' } });
  t.match(readyOn32, { version: '3.2.0', tunnelUp: true }, 'the new agent wrote its readiness');

  server.find = managed('3.3.0', true, 'canary of group dev');
  const bad = await upgrade(['--health-timeout', '8']);
  t.equal(bad.code, 1, 'unhealthy: the run fails');
  t.match(bad.stderr, /GATE_ERR_UPGRADE_UNHEALTHY: the agent was not ready on 3\.3\.0 \(.*\); reverted to 3\.2\.0/);
  t.equal(bad.stdout[3], 'installing 3.3.0 (rollout)');
  t.match(bad.stdout[4], /^the agent is not ready on 3\.3\.0 \(the agent reports version 3\.2\.0, not 3\.3\.0\): reinstalling 3\.2\.0$/);
  t.equal(bad.stdout[5], 'reverted to 3.2.0: the agent is ready');
  t.equal(bad.stdout.length, 6);
  t.same(await installs(), ['3.1.0', '3.2.0', '3.3.0', '3.2.0'], 'the new version, then the old one again');
  t.equal((await readFile(join(dir, 'installed'), 'utf8')).trim(), '3.2.0', '3.2.0 is installed again');
  const after = (await readReadiness(state))!;
  t.match(after, { version: '3.2.0', tunnelUp: true }, 'and running with its tunnel up');
  t.not(after.pid, readyOn32.pid, 'a new process: the revert restarted it');
  t.match(await readLastUpdate(state), { from: '3.2.0', to: '3.3.0', outcome: 'reverted', reason: /^not ready on 3\.3\.0: / });
  await until(async () => (await row())?.last_update?.outcome === 'reverted', 'the inventory shows the revert', 20_000);
  t.match(
    await row(),
    { version: '3.2.0', last_update: { from: '3.2.0', to: '3.3.0', outcome: 'reverted', reason: /^not ready on 3\.3\.0: / } },
    'the cluster sees the agent back on 3.2.0, and why',
  );
  t.match(await readFile(join(dir, 'agent.log'), 'utf8'), 'gate-mux 3.3.0: cannot start', 'the broken build did run, and failed');
});
