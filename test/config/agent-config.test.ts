// The agent's configuration file: what `gate-mux agent configure` writes reads back to the same
// values (whatever the token holds), errors name the key and line as the proxy's file does, and the
// allow list is the union of `allow` and the resources' targets.
import t from 'tap';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { configure, parseResourceFlag } from '../../lib/cli/agent-configure.js';
import { renderAgentConfig } from '../../lib/config/agent-config-text.js';
import { allowedTargets, parseAgentConfig, servicesOf, DEFAULT_AGENT_STATE_DIR } from '../../lib/config/agent-config.js';
import type { ConfigError } from '../../lib/config/load.js';
import { ErrorCodes } from '../../lib/errors.js';
import { tempDir } from '../helpers/temp-dir.js';

const PIN = `sha256:${'ab'.repeat(32)}`;

function capture(): { io: { out: (l: string) => void; err: (l: string) => void }; text: () => string } {
  const lines: string[] = [];
  return { io: { out: (l) => lines.push(l), err: (l) => lines.push(l) }, text: () => lines.join('\n') };
}

t.test('rendered text reads back to the same values, whatever the strings hold', async (t) => {
  for (const token of ['plain-token-1234567890', '0123456789012345', 'a: b # c\nd: e', '"quoted" \'x\'', 'yes', '- item']) {
    const text = renderAgentConfig({
      proxy: 'gate.example.com:443',
      token,
      caPin: PIN.toUpperCase().replace('SHA256', 'sha256'),
      name: 'node-1',
      allow: ['10.0.0.1:22', '[fd00::1]:5432'],
      resources: [
        { kind: 'db', name: 'orders: main', target: '10.0.0.5:5432', publicAddr: ['orders.example.com'] },
        { kind: 'ssh', name: 'bastion', target: '10.0.0.1:22', publicAddr: ['a.example.com', '192.0.2.1'] },
        { kind: 'app', name: 'grafana', target: '10.0.0.7:3000', publicAddr: [] },
      ],
      upgradeChannel: 'stable/cloud',
      packageManager: 'apt',
    });
    const { config, warnings } = parseAgentConfig(text);
    t.same(warnings, []);
    t.equal(config.token, token, `token ${JSON.stringify(token)} survives`);
    t.equal(config.caPin, PIN, 'the pin is normalised to lower case');
    t.equal(config.proxy, 'gate.example.com:443');
    t.equal(config.stateDir, DEFAULT_AGENT_STATE_DIR);
    t.same(config.updater, {
      channel: 'stable/cloud',
      group: 'default',
      packageManager: 'apt',
      installCommand: undefined,
      versionCommand: undefined,
      allowDowngrade: false,
    });
    t.same(config.resources[0], { kind: 'db', name: 'orders: main', target: '10.0.0.5:5432', publicAddr: ['orders.example.com'] });
    t.same(config.resources[1]!.publicAddr, ['a.example.com', '192.0.2.1']);
    t.same(
      allowedTargets(config),
      ['10.0.0.1:22', '[fd00::1]:5432', '10.0.0.5:5432', '10.0.0.7:3000'],
      'allow, then each resource target once',
    );
    t.same(servicesOf(config), [
      { kind: 'db', name: 'orders: main' },
      { kind: 'ssh', name: 'bastion' },
      { kind: 'app', name: 'grafana' },
    ]);
  }
});

t.test('defaults and the smallest file', async (t) => {
  const { config, warnings } = parseAgentConfig('proxy: gate.example.com:443\nname: a\n');
  t.equal(config.updater.channel, 'default');
  t.equal(config.updater.group, 'default', 'an agent that names no rollout group is in default');
  t.equal(parseAgentConfig('proxy: gate.example.com:443\nname: a\nupdater: {group: prod-eu}\n').config.updater.group, 'prod-eu');
  t.throws(
    () => parseAgentConfig('proxy: gate.example.com:443\nname: a\nupdater: {group: "prod eu"}\n'),
    /updater\.group: "prod eu" is not a group name/,
  );
  t.equal(config.updater.packageManager, undefined);
  t.equal(config.updater.allowDowngrade, false, 'downgrades are refused unless the file allows them');
  t.equal(parseAgentConfig('proxy: gate.example.com:443\nname: a\nupdater: {allow_downgrade: true}\n').config.updater.allowDowngrade, true);
  t.throws(
    () => parseAgentConfig('proxy: gate.example.com:443\nname: a\nupdater: {allow_downgrade: sometimes}\n'),
    /updater\.allow_downgrade: expected true or false/,
  );
  t.match(warnings[0], /neither allow nor resources names a target/);
});

t.test('every problem named with its key and line, in file order', async (t) => {
  const text = [
    'proxy: gate.example.com', // 1: no port
    'name: "bad name!"', // 2
    'ca_pin: sha1:abc', // 3
    'allow: [10.0.0.1]', // 4: no port
    'resources:', // 5
    '  - kind: database', // 6
    '    name: x', // 7
    '    target: 10.0.0.1:5432', // 8
    '    public_addr: 3', // 9
    'connection_count: 0', // 10
    'updater:', // 11
    '  package_manager: brew', // 12
    '  channel: "a b"', // 13
    '  install_command: /bin/true', // 14
    'proxi: x', // 15
  ].join('\n');
  const err = t.throws(() => parseAgentConfig(text, 'agent.yaml')) as ConfigError;
  t.equal(err.code, ErrorCodes.CONFIG_INVALID);
  const lines = err.problems.map((p) => `${p.line}: ${p.path}`);
  t.same(lines, [
    '1: proxy',
    '2: name',
    '3: ca_pin',
    '4: allow[0]',
    '6: resources[0].kind',
    '9: resources[0].public_addr',
    '10: connection_count',
    '12: updater.package_manager',
    '13: updater.channel',
    '14: updater.install_command',
    '14: updater.install_command',
    '15: proxi',
  ]);
  t.match(err.message, /line 15: proxi: unknown key \(did you mean "proxy"\?\)/);
  t.match(err.message, /line 14: updater.install_command: the command must contain \{version\}/);
  t.match(err.message, /line 14: updater.install_command: an install_command needs a version_command/);
  t.throws(() => parseAgentConfig('proxy: [unterminated\n'), { code: ErrorCodes.CONFIG_INVALID, message: /YAML syntax/ });
});

t.test('--resource KIND:NAME=HOST:PORT[@PUBLIC,...]', async (t) => {
  t.same(parseResourceFlag('db:orders=10.0.0.5:5432@orders.example.com,10.9.9.9'), {
    kind: 'db',
    name: 'orders',
    target: '10.0.0.5:5432',
    publicAddr: ['orders.example.com', '10.9.9.9'],
  });
  t.same(parseResourceFlag('kube:k=10.0.0.9:6443'), { kind: 'kube', name: 'k', target: '10.0.0.9:6443', publicAddr: [] });
  t.match(parseResourceFlag('db:orders'), /expected KIND:NAME=HOST:PORT/);
  t.match(parseResourceFlag('vm:x=10.0.0.1:1'), /kind vm is not one of db, ssh, kube, app, desktop/);
});

t.test('gate-mux agent configure: a 0600 file, checked before it is written, never silently replaced', async (t) => {
  const dir = await tempDir(t, 'configure');
  const output = join(dir, 'etc', 'agent.yaml');
  const args = [
    '--proxy',
    'gate.example.com:443',
    '--token',
    'secret-token-123456',
    '--ca-pin',
    PIN,
    '--name',
    'n1',
    '--allow',
    '10.0.0.1:22',
    '--upgrade-channel',
    'stable/cloud',
    '--package-manager',
    'dnf',
    '--update-group',
    'staging',
    '--output',
    output,
  ];
  const first = capture();
  t.equal(await configure(args, first.io), 0, first.text());
  t.equal((await stat(output)).mode & 0o777, 0o600);
  const { config } = parseAgentConfig(await readFile(output, 'utf8'));
  t.equal(config.updater.packageManager, 'dnf');
  t.equal(config.updater.channel, 'stable/cloud');
  t.equal(config.updater.group, 'staging', '--update-group is written as updater.group');

  await writeFile(output, '# edited by hand\nproxy: other:1\nname: n1\nallow: [10.0.0.1:22]\n', { mode: 0o600 });
  const again = capture();
  t.equal(await configure(args, again.io), 1);
  t.match(again.text(), /exists; --force replaces it/);
  t.match(await readFile(output, 'utf8'), /edited by hand/, 'the hand-edited file is kept');
  t.equal(await configure([...args, '--force'], capture().io), 0);
  t.notMatch(await readFile(output, 'utf8'), /edited by hand/);

  const bad = capture();
  t.equal(await configure(['--proxy', 'gate.example.com', '--name', 'n1', '--output', join(dir, 'bad.yaml')], bad.io), 1);
  t.match(bad.text(), /GATE_ERR_CONFIG_INVALID: .*\n.*proxy: expected host:port/);
  await t.rejects(stat(join(dir, 'bad.yaml')), { code: 'ENOENT' }, 'nothing written for a file that would not load');
  const usage = capture();
  t.equal(await configure(['--name', 'x'], usage.io), 2);
  t.equal(await configure(['--proxy', 'a:1', '--name', 'x', '--package-manager', 'brew'], usage.io), 2);
  t.equal(await configure(['--proxy', 'a:1', '--name', 'x', '--resource', 'nope'], usage.io), 2);
  t.equal(await configure(['--bogus'], usage.io), 2);
  t.equal(await configure(['--proxy', 'a:1', '--name', 'x', '--update-group', 'a b'], usage.io), 2, 'a group that is no name');
  t.match(usage.text(), /--package-manager brew: expected apt, dnf, yum, zypper/);
  const help = capture();
  t.equal(await configure(['--help'], help.io), 0);
  t.match(help.text(), /usage: gate-mux agent configure/);
});
