// The systemd units the packages install (packaging/systemd/), checked by systemd-analyze and run
// the way systemd runs them (test/helpers/systemd-unit.ts): the proxy's unit starts gate-mux proxy,
// writes the pid file, answers /webapi/ping and reloads on its ExecReload; the agent's unit starts
// from a file `gate-mux agent configure` wrote, holds its tunnel, reloads and stops cleanly.
import t from 'tap';
import { copyFile, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { fetchText } from '../../lib/client/fetch-text.js';
import { caPin } from '../../lib/pki/ca-pin.js';
import { freePort } from '../helpers/daemon.js';
import { closeServer, readUntil, run, startTaggedTcpServer, tlsClient, until } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { GATE_MUX } from '../helpers/proxy-command.js';
import { execArgv, readUnit, startUnitCommand, unitEnvironment, unitValue, unitValues, type Unit } from '../helpers/systemd-unit.js';
import { tempDir } from '../helpers/temp-dir.js';

const UNITS = fileURLToPath(new URL('../../../packaging/systemd/', import.meta.url));
const DEFAULT_FILE = fileURLToPath(new URL('../../../packaging/default/gate', import.meta.url));
const GATE_UPGRADE = fileURLToPath(new URL('../../lib/cli/gate-upgrade.js', import.meta.url));
const unit = (name: string): Unit => readUnit(join(UNITS, name));

// What the platform's document asks of a package-manager install's unit.
const DOCUMENTED: Array<[string, string, string]> = [
  ['Unit', 'After', 'network.target'],
  ['Service', 'Type', 'simple'],
  ['Service', 'EnvironmentFile', '-/etc/default/gate'],
  ['Service', 'Restart', 'always'],
  ['Service', 'RestartSec', '5'],
  ['Service', 'LimitNOFILE', '524288'],
  ['Service', 'ExecReload', '/bin/kill -HUP $MAINPID'],
  ['Install', 'WantedBy', 'multi-user.target'],
];

t.test('the long-running units carry every field the document lists', async (t) => {
  for (const name of ['gate.service', 'gate-agent.service']) {
    const u = unit(name);
    for (const [section, key, value] of DOCUMENTED) t.equal(unitValue(u, section, key), value, `${name} ${key}`);
  }
  t.equal(unitValue(unit('gate.service'), 'Service', 'PIDFile'), '/run/gate.pid');
  t.equal(
    unitValue(unit('gate.service'), 'Service', 'ExecStart'),
    '/usr/bin/gate-mux proxy --config /etc/gate/gate.yaml --pid-file /run/gate.pid $GATE_FLAGS',
  );
  t.equal(
    unitValue(unit('gate-agent.service'), 'Service', 'ExecStart'),
    '/usr/bin/gate-mux agent --config /etc/gate/agent.yaml $GATE_AGENT_FLAGS',
  );
  const updater = unit('gate-upgrade.service');
  t.equal(unitValue(updater, 'Service', 'EnvironmentFile'), '-/etc/default/gate');
  t.equal(
    unitValue(updater, 'Service', 'ExecStart'),
    '/usr/bin/gate-upgrade run --lock /run/gate-upgrade/lock',
    'the updater reads everything else from /etc/gate/agent.yaml',
  );
  t.equal(unitValue(unit('gate-upgrade.timer'), 'Install', 'WantedBy'), 'timers.target');
  t.same(unitValues(unit('gate-ent-updater.conf'), 'Service', 'Environment'), ['GATE_EXT_UPGRADER=unit']);
});

t.test('systemd-analyze verify passes on every unit', async (t) => {
  const analyze = requirePeer(t, 'systemd-analyze', 'systemd');
  if (!analyze) return;
  // verify checks that each command exists and is executable: the test's copies name scripts
  // that run this checkout's programs in place of /usr/bin/gate-mux and /usr/bin/gate-upgrade
  // (the machine test verifies the installed units as they are).
  const dir = await tempDir(t, 'units');
  const programs: Record<string, string> = { '/usr/bin/gate-mux': GATE_MUX, '/usr/bin/gate-upgrade': GATE_UPGRADE };
  for (const [installed, script] of Object.entries(programs)) {
    await writeFile(join(dir, installed.split('/').at(-1)!), `#!/bin/sh\nexec ${process.execPath} ${script} "$@"\n`, { mode: 0o755 });
  }
  for (const name of ['gate.service', 'gate-agent.service', 'gate-upgrade.service', 'gate-upgrade.timer']) {
    let text = await readFile(join(UNITS, name), 'utf8');
    for (const installed of Object.keys(programs)) text = text.replaceAll(installed, join(dir, installed.split('/').at(-1)!));
    await writeFile(join(dir, name), text);
  }
  const names = ['gate.service', 'gate-agent.service', 'gate-upgrade.service', 'gate-upgrade.timer'].map((n) => join(dir, n));
  const result = await run(analyze, ['verify', '--man=no', ...names]);
  t.equal(result.code, 0, `systemd-analyze verify:\n${result.stdout}${result.stderr}`);
  t.equal(result.stderr.trim(), '', 'no warnings');
});

const runArgv = ([command, ...args]: string[]): ReturnType<typeof run> => run(command!, args);

/** Tap's variables (coverage of the children) beside a minimal PATH, as systemd's environment is. */
const tapEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k === 'NODE_OPTIONS' || k.startsWith('_TAPJS_')));
const baseEnv = { ...tapEnv, PATH: process.env.PATH ?? '/usr/bin:/bin' };
const withTapOptions = (env: Record<string, string | undefined>): Record<string, string | undefined> =>
  tapEnv.NODE_OPTIONS && env.NODE_OPTIONS !== tapEnv.NODE_OPTIONS
    ? { ...env, NODE_OPTIONS: `${tapEnv.NODE_OPTIONS} ${env.NODE_OPTIONS ?? ''}` }
    : env;

t.test('gate.service and gate-agent.service run as systemd runs them', async (t) => {
  const dir = await tempDir(t, 'unit-run');
  const port = await freePort('127.0.0.1');
  const tagged = await startTaggedTcpServer('unit-target');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const proxyYaml = (publicAddr: string): string =>
    stringify({
      version: 'v3',
      data_dir: join(dir, 'data'),
      auth_service: { proxy_listener_mode: 'multiplex' },
      proxy_service: { web_listen_addr: `127.0.0.1:${port}`, public_addr: publicAddr, upstreams: { redis: `tunnel:unit-agent/${target}` } },
    });
  const paths = {
    config: join(dir, 'gate.yaml'),
    pid: join(dir, 'gate.pid'),
    defaults: join(dir, 'default-gate'),
    agentConfig: join(dir, 'agent.yaml'),
  };
  await writeFile(paths.config, proxyYaml(`localhost:${port}`));
  // The packaged /etc/default/gate (every line a comment), plus the flags variable set as an
  // operator would: $GATE_FLAGS must reach the command line as words.
  await copyFile(DEFAULT_FILE, paths.defaults);
  await writeFile(
    paths.defaults,
    `${await readFile(paths.defaults, 'utf8')}GATE_FLAGS=--log-level info --drain-timeout 1\nGATE_AGENT_FLAGS=--log-level info\n`,
  );
  const replace = {
    '/usr/bin/gate-mux': [process.execPath, GATE_MUX],
    '/etc/gate/gate.yaml': [paths.config],
    '/run/gate.pid': [paths.pid],
    '/etc/gate/agent.yaml': [paths.agentConfig],
  };
  const files = { '/etc/default/gate': paths.defaults };

  // The proxy.
  const gate = unit('gate.service');
  const gateEnv = withTapOptions(unitEnvironment(gate, { base: baseEnv, files }));
  t.equal(gateEnv.NODE_OPTIONS?.endsWith('--max-semi-space-size=2'), true, 'Environment= reaches the command');
  t.same(execArgv(unitValue(gate, 'Service', 'ExecStart')!, gateEnv, replace).slice(2), [
    'proxy',
    '--config',
    paths.config,
    '--pid-file',
    paths.pid,
    '--log-level',
    'info',
    '--drain-timeout',
    '1',
  ]);
  const proxy = startUnitCommand(t, unitValue(gate, 'Service', 'ExecStart')!, gateEnv, replace);
  await until(() => proxy.output().includes('try: curl') || proxy.child.exitCode !== null, 'the proxy started', 20_000);
  const pid = Number((await readFile(paths.pid, 'utf8')).trim());
  t.equal(pid, proxy.child.pid, 'the pid file names the main process');
  const ca = await readFile(join(dir, 'data', 'ca.pem'), 'utf8');
  const ping = async (): Promise<{ proxy: { ssh: { public_addr: string } } }> => {
    const answer = await fetchText(`https://127.0.0.1:${port}/webapi/ping`, { ca, servername: 'localhost', env: {} });
    t.equal(answer.status, 200);
    return JSON.parse(answer.body) as { proxy: { ssh: { public_addr: string } } };
  };
  t.equal((await ping()).proxy.ssh.public_addr, `localhost:${port}`);

  // ExecReload with $MAINPID: the new public_addr is served by the same process.
  await writeFile(paths.config, proxyYaml(`gate.example.test:${port}`));
  const reload = await runArgv(execArgv(unitValue(gate, 'Service', 'ExecReload')!, { MAINPID: String(pid) }));
  t.equal(reload.code, 0, reload.stderr);
  await until(() => proxy.output().includes('configuration and certificates reloaded'), 'reloaded', 10_000);
  t.equal((await ping()).proxy.ssh.public_addr, `gate.example.test:${port}`);
  t.equal(proxy.child.exitCode, null, 'still the same process');

  // The agent, from the file `gate-mux agent configure` writes.
  const token = (await readFile(join(dir, 'data', 'join-token'), 'utf8')).trim();
  const configure = await run(process.execPath, [
    GATE_MUX,
    'agent',
    'configure',
    '--proxy',
    `127.0.0.1:${port}`,
    '--server-name',
    'localhost',
    '--token',
    token,
    '--ca-pin',
    caPin(ca),
    '--name',
    'unit-agent',
    '--resource',
    `db:orders=${target}@orders.example.test`,
    '--state-dir',
    join(dir, 'agent-state'),
    '--output',
    paths.agentConfig,
  ]);
  t.equal(configure.code, 0, configure.stderr);
  t.equal((await stat(paths.agentConfig)).mode & 0o777, 0o600, 'the file holding the token is 0600');
  const agentUnit = unit('gate-agent.service');
  const agentEnv = withTapOptions(unitEnvironment(agentUnit, { base: baseEnv, files }));
  const agent = startUnitCommand(t, unitValue(agentUnit, 'Service', 'ExecStart')!, agentEnv, replace);
  await until(() => agent.output().includes('tunnel up: agent unit-agent'), 'the agent holds its tunnel', 20_000);
  t.match(agent.output(), /joined as unit-agent/);
  const carried = async (): Promise<string> => {
    const client = await tlsClient(port, { servername: 'localhost', ca, ALPNProtocols: ['gate-redis'] });
    const line = (await readUntil(client, (s) => s.includes('\n'))).trim();
    client.destroy();
    return line;
  };
  t.equal(await carried(), 'unit-target', 'the route through the tunnel reaches the resource the file names');

  // Reload: a broken file is refused and the tunnel stays; a good one restarts the tunnel in place.
  const good = await readFile(paths.agentConfig, 'utf8');
  await writeFile(paths.agentConfig, `${good}\nbogus_key: 1\n`);
  const hup = (): Promise<unknown> =>
    runArgv(execArgv(unitValue(agentUnit, 'Service', 'ExecReload')!, { MAINPID: String(agent.child.pid) }));
  await hup();
  await until(() => agent.output().includes('reload refused'), 'a broken file refused', 10_000);
  t.match(agent.output(), /GATE_ERR_CONFIG_INVALID: invalid configuration .*\n {2}line \d+: bogus_key: unknown key/);
  t.equal(await carried(), 'unit-target', 'still carried after the refused reload');
  await writeFile(paths.agentConfig, good);
  await hup();
  await until(() => (agent.output().match(/tunnel up: agent unit-agent/g) ?? []).length >= 2, 'the tunnel back after the reload', 20_000);
  t.match(agent.output(), /tunnel closed/);
  t.notMatch(agent.output().split('tunnel closed')[1] ?? '', /joined as/, 'the reload reuses the identity: no second join');
  t.equal(await carried(), 'unit-target');

  // Stop as systemd does (SIGTERM to the main process): the agent closes its tunnel, the proxy removes its pid file.
  agent.child.kill('SIGTERM');
  t.equal(await agent.exited, 0);
  proxy.child.kill('SIGTERM');
  t.equal(await proxy.exited, 0);
  await t.rejects(stat(paths.pid), { code: 'ENOENT' }, 'the pid file is removed on stop');
  await rm(paths.agentConfig);
});
