import t from 'tap';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { requirePeer } from '../helpers/peers.js';
import { GATE_MUX, startProxyCommand, stopProxyCommand } from '../helpers/proxy-command.js';
import { closeServer, readUntil, run, startTaggedTcpServer, tcpClient } from '../helpers/net.js';
import { httpGet } from '../helpers/prometheus.js';
import { tempDir } from '../helpers/temp-dir.js';

t.test('npm start on the embedded default configuration answers curl --cacert on 127.0.0.1:3080', async (t) => {
  const curl = requirePeer(t, 'curl', 'curl');
  if (!curl) return;
  const cwd = await tempDir(t, 'cli');
  const { child, output } = await startProxyCommand(t, [], cwd);
  t.match(output(), /listening on 127\.0\.0\.1:3080 \(multiplex/);
  const ca = join(cwd, '.data', 'ca.pem');
  t.match(output(), `development CA: .data/ca.pem`);
  t.match(output(), /agents: CA pin sha256:[0-9a-f]{64}\n/, 'the CA pin is printed');
  t.match(
    output(),
    /node \/\S+\/dist\/lib\/cli\/gate-mux\.js agent --proxy localhost:3080 --ca-pin sha256:[0-9a-f]{64} --token-file \.data\/join-token --name local-agent --allow 127\.0\.0\.1:5432 --state-dir \.agent-local-agent/,
    'a ready-to-paste agent command for the configured agent',
  );
  t.notOk(output().includes(readFileSync(join(cwd, '.data', 'join-token'), 'utf8').trim()), 'the token itself is not printed');
  const ping = await run(curl, ['-sS', '--cacert', ca, 'https://127.0.0.1:3080/webapi/ping']);
  t.equal(ping.code, 0, ping.stderr);
  t.match(JSON.parse(ping.stdout), {
    proxy: { tls_routing_enabled: true, ssh: { listen_addr: '127.0.0.1:3080' } },
    server_version: '0.1.0',
  });
  t.equal(await stopProxyCommand(child), 0, 'SIGTERM drains and exits 0');

  // A second start keeps the CA (clients that trust it keep working) and issues a fresh server cert.
  const caBefore = readFileSync(ca, 'utf8');
  const again = await startProxyCommand(t, [], cwd);
  t.equal(readFileSync(ca, 'utf8'), caBefore, 'the CA made at first start is reused');
  const second = await run(curl, [
    '-sS',
    '--cacert',
    ca,
    'https://localhost:3080/v1/webapi/automaticupgrades/channel/stable/cloud/version',
  ]);
  t.equal(second.stdout, 'v0.1.0');
  t.equal(await stopProxyCommand(again.child), 0);
});

t.test('--config and --pid-file; SIGHUP switches a route while a connection stays open', async (t) => {
  const one = await startTaggedTcpServer('SSH-2.0-one');
  const two = await startTaggedTcpServer('SSH-2.0-two');
  t.teardown(async () => {
    for (const s of [...one.sockets, ...two.sockets]) s.destroy();
    await Promise.all([closeServer(one.server), closeServer(two.server)]);
  });
  const dir = await tempDir(t, 'cli');
  const config = join(dir, 'gate.yaml');
  const pidFile = join(dir, 'gate.pid');
  const yaml = (sshPort: number) =>
    `version: v3\ndata_dir: ${join(dir, 'data')}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n  upstreams:\n    ssh: 127.0.0.1:${sshPort}\n`;
  writeFileSync(config, yaml(one.port));
  const { child, output } = await startProxyCommand(t, ['--config', config, '--pid-file', pidFile], dir);
  const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(output())![1]);
  t.equal(readFileSync(pidFile, 'utf8').trim(), String(child.pid), 'pid file written');

  const open = await tcpClient(port);
  open.write('SSH-2.0-a\r\n');
  t.match(await readUntil(open, (s) => s.includes('SSH-2.0-a')), /^SSH-2.0-one\n/);

  writeFileSync(config, yaml(two.port));
  child.kill('SIGHUP');
  await readUntil(child.stdout!, () => output().includes('reloaded'));

  const fresh = await tcpClient(port);
  fresh.write('SSH-2.0-b\r\n');
  t.match(await readUntil(fresh, (s) => s.includes('SSH-2.0-b')), /^SSH-2.0-two\n/, 'new connections follow the new route');
  open.write('after reload');
  t.match(await readUntil(open, (s) => s.includes('after reload')), /after reload/, 'the open connection survived the reload');
  open.destroy();
  fresh.destroy();

  writeFileSync(config, 'proxy_service:\n  no_such_key: 1\n');
  child.kill('SIGHUP');
  await readUntil(child.stdout!, () => output().includes('reload failed'));
  t.match(output(), /no_such_key/, 'a bad reload says what is wrong and keeps running');

  t.equal(await stopProxyCommand(child), 0);
  t.notOk(existsSync(pidFile), 'pid file removed on exit');
});

t.test('logs: JSON lines when the output is not a terminal, readable lines with --log-format pretty', async (t) => {
  const dir = await tempDir(t, 'cli');
  const config = join(dir, 'gate.yaml');
  writeFileSync(config, `version: v3\ndata_dir: ${join(dir, 'data')}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n`);
  const json = await startProxyCommand(t, ['--config', config], dir);
  await stopProxyCommand(json.child);
  const line = json
    .output()
    .split('\n')
    .find((l) => l.includes('"msg":"listening"'));
  t.ok(line, 'a JSON log line for the listener');
  t.match(JSON.parse(line!), { level: 30, component: 'mux', msg: 'listening' });
  const pretty = await startProxyCommand(t, ['--config', config, '--log-format', 'pretty'], dir);
  await stopProxyCommand(pretty.child);
  t.match(pretty.output(), /INFO.*listening/, 'pino-pretty formats the same line');
  t.notMatch(pretty.output(), /"msg":"listening"/, 'and no JSON');
});

t.test('diag_addr: the banner names the diagnostics listener, which answers /readyz', async (t) => {
  const dir = await tempDir(t, 'cli');
  const config = join(dir, 'gate.yaml');
  writeFileSync(
    config,
    `version: v3\ndata_dir: ${join(dir, 'data')}\ndiag_addr: 127.0.0.1:0\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n`,
  );
  const { child, output } = await startProxyCommand(t, ['--config', config], dir);
  const match = /diagnostics on http:\/\/127\.0\.0\.1:(\d+) \(\/healthz, \/readyz, \/metrics\)/.exec(output());
  t.ok(match, `the banner names it:\n${output()}`);
  const ready = await httpGet(Number(match![1]), '/readyz');
  t.equal(ready.status, 200, ready.body);
  t.equal(await stopProxyCommand(child), 0, 'SIGTERM: a clean exit');
});

t.test('usage: --help, --version, an unknown command or option, each with its exit code', async (t) => {
  const gateMux = (...args: string[]) => run(process.execPath, [GATE_MUX, ...args]);
  const help = await gateMux('--help');
  t.equal(help.code, 0);
  t.match(help.stdout, /commands:[\s\S]*proxy[\s\S]*local-proxy/);
  const proxyHelp = await gateMux('proxy', '--help');
  t.equal(proxyHelp.code, 0);
  t.match(proxyHelp.stdout, /--pid-file FILE[\s\S]*--drain-timeout/);
  const agent = await gateMux('agent', '--help');
  t.equal(agent.code, 0, 'gate-mux agent is the agent command');
  t.match(agent.stdout, /--allow[\s\S]*--state-dir/);
  const upgrade = await gateMux('upgrade', '--help');
  t.equal(upgrade.code, 0, 'gate-mux upgrade is gate-upgrade');
  t.match(upgrade.stdout, /dry-run[\s\S]*export-schedule/);
  const version = await gateMux('--version');
  t.same(
    version.stdout.split('\n'),
    [
      JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version,
      `Node.js ${process.version} (${process.execPath})`,
      '',
    ],
    'the version, then the runtime',
  );
  const unknown = await gateMux('frobnicate');
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown command 'frobnicate'/);
  const badOption = await gateMux('proxy', '--no-such-option');
  t.equal(badOption.code, 2);
  t.match(badOption.stderr, /no-such-option[\s\S]*usage: gate-mux proxy/);
  const badLevel = await gateMux('proxy', '--log-level', 'loud');
  t.equal(badLevel.code, 2, 'an unknown log level is a usage error');
  t.match(badLevel.stderr, /--log-level loud: expected trace, debug, info/);
  const badFormat = await gateMux('local-proxy', '--proxy', 'x:1', '--alpn', 'a', '--insecure', '--log-format', 'xml');
  t.equal(badFormat.code, 2, 'an unknown log format is a usage error');
  t.match(badFormat.stderr, /--log-format xml: expected pretty or json/);
  const badDrain = await gateMux('proxy', '--drain-timeout', 'soon');
  t.equal(badDrain.code, 2);
  const none = await gateMux();
  t.equal(none.code, 2, 'no command is a usage error');
  const missing = await gateMux('proxy', '--config', '/nonexistent/gate.yaml');
  t.equal(missing.code, 1, 'a configuration that does not load exits 1');
  t.match(missing.stderr, /gate-mux proxy: .*nonexistent/);
});
