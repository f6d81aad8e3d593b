// lib/cli/agent.ts's main() in this process, against a YAML-configured GateProxy: usage, the
// report-only mode, joining into a state directory, renewal (scheduled early through the hook),
// a restart that reuses the identity, a pre-issued identity, and the errors it names.
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { main } from '../../lib/cli/agent.js';
import { ErrorCodes } from '../../lib/errors.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { startTaggedTcpServer, closeServer, readUntil, tlsClient, until } from '../helpers/net.js';
import { tempDir } from '../helpers/temp-dir.js';

/** Collects what main() prints. */
function capture(): { io: { out: (l: string) => void; err: (l: string) => void }; out: string[]; err: string[]; text: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l) => out.push(l), err: (l) => err.push(l) }, out, err, text: () => [...out, ...err].join('\n') };
}

/** A stop signal the test fires. */
function stopper(): { signal: Promise<void>; stop: () => void } {
  let stop = (): void => {};
  const signal = new Promise<void>((resolve) => (stop = resolve));
  return { signal, stop };
}

t.test('usage and argument errors', async (t) => {
  const help = capture();
  t.equal(await main(['--help'], { io: help.io }), 0);
  t.match(help.text(), /--state-dir DIR/);
  const unknown = capture();
  t.equal(await main(['--nonsense'], { io: unknown.io }), 2);
  t.match(unknown.text(), /Unknown option/);
  const noProxy = capture();
  t.equal(await main(['--name', 'x'], { io: noProxy.io }), 2);
  const badTimeout = capture();
  t.equal(await main(['--proxy', 'h:1', '--timeout-ms', 'soon'], { io: badTimeout.io }), 2);
  const noState = capture();
  t.equal(await main(['--proxy', '127.0.0.1:1', '--name', 'x', '--log-level', 'silent'], { io: noState.io }), 1);
  t.match(noState.text(), /GATE_ERR_INVALID_ARGUMENT: an agent that joins needs --state-dir/);
  const halfIdentity = capture();
  t.equal(await main(['--proxy', '127.0.0.1:1', '--name', 'x', '--cert', 'c.pem', '--log-level', 'silent'], { io: halfIdentity.io }), 1);
  t.match(halfIdentity.text(), /needs --cert, --key and --ca/);
  t.match(help.text(), /--connection-count N/);
  for (const bad of ['0', '-1', '1.5', 'two', '65']) {
    const badCount = capture();
    t.equal(
      await main(['--proxy', 'h:1', '--name', 'x', `--connection-count=${bad}`], { io: badCount.io }),
      2,
      `--connection-count ${bad}`,
    );
    t.match(badCount.text(), /--connection-count takes a whole number from 1 to 64/);
  }
  t.match(help.text(), /--service KIND:NAME/);
  for (const bad of ['db', 'printer:x', 'db:']) {
    const badService = capture();
    t.equal(
      await main(['--proxy', 'h:1', '--name', 'x', '--service', 'ssh:ok', '--service', bad], { io: badService.io }),
      2,
      `--service ${bad}`,
    );
    t.match(badService.text(), /--service: a service is KIND:NAME with KIND one of db, ssh, kube, app, desktop/);
  }
  // The join token: from a file, not the command line; bad files are named.
  t.match(help.text(), /--token-file FILE/);
  const dir = await tempDir(t, 'cli-token');
  const empty = join(dir, 'empty');
  await writeFile(empty, '\n');
  const large = join(dir, 'large');
  await writeFile(large, 'x'.repeat(5000));
  for (const [args, message] of [
    [['--token', 'abc', '--token-file', empty], /--token-file or --token, not both/],
    [['--token-file', join(dir, 'missing')], /--token-file \S+missing: ENOENT/],
    [['--token-file', empty], /--token-file \S+empty is empty/],
    [['--token-file', large], /5000 bytes is not a join token/],
  ] as Array<[string[], RegExp]>) {
    const bad = capture();
    t.equal(await main(['--proxy', 'h:1', '--name', 'x', ...args], { io: bad.io, env: {} }), 2, args.join(' '));
    t.match(bad.text(), message);
  }
});

t.test('join, hold, renew, restart, pre-issued identity, report mode', async (t) => {
  const tagged = await startTaggedTcpServer('cli-target');
  t.teardown(() => closeServer(tagged.server));
  const target = `127.0.0.1:${tagged.port}`;
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: { redis: `tunnel:cli/${target}` } });
  const proxy = `127.0.0.1:${gate.port('multiplex')}`;
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  const stateDir = join(await tempDir(t, 'cli-agent'), 'state');
  const base = [
    '--proxy',
    proxy,
    '--server-name',
    'localhost',
    '--name',
    'cli',
    '--allow',
    target,
    '--state-dir',
    stateDir,
    '--log-level',
    'silent',
  ];
  const hooks = { env: {} };

  // First start: join, tunnel, one renewal (scheduled at once by the hook), then stop.
  const first = capture();
  const firstStop = stopper();
  let renewals = 0;
  // The token from the environment (GATE_JOIN_TOKEN), as a unit's EnvironmentFile would give it.
  const running = main([...base, '--ca-pin', gate.proxy.caPin], {
    env: { GATE_JOIN_TOKEN: token },
    io: first.io,
    stopSignal: firstStop.signal,
    renewAt: () => (renewals++ === 0 ? Date.now() : Date.now() + 3_600_000),
  });
  await until(() => first.out.some((l) => l.startsWith('certificate renewed')), 'joined, connected and renewed', 20_000);
  t.match(first.text(), /joined as cli; identity kept in /);
  t.notMatch(first.text(), /warning: --token/, 'no warning without --token');
  await until(() => first.out.some((l) => l.startsWith('tunnel up: agent cli via direct')), 'tunnel up');
  t.ok(
    first.out.some((l) => l === `tunnel up: agent cli via direct (connection 1) (proxy ${gate.proxy.proxyId})`),
    'the line names the proxy the tunnel landed on',
  );
  const client = await tlsClient(gate.port('multiplex'), { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal((await readUntil(client, (s) => s.includes('\n'))).trim(), 'cli-target', 'the CLI agent carries the route');
  client.destroy();
  const renewedCert = await readFile(join(stateDir, 'agent.pem'), 'utf8');
  firstStop.stop();
  t.equal(await running, 0);
  t.match(first.text(), /tunnel closed/);

  // Restart: the renewed identity from the state directory, no token.
  const second = capture();
  const secondStop = stopper();
  const again = main(base, { ...hooks, io: second.io, stopSignal: secondStop.signal });
  await until(() => second.out.some((l) => l.startsWith('tunnel up')), 'up again without a token', 20_000);
  t.notMatch(second.text(), /joined as/);
  t.equal(await readFile(join(stateDir, 'agent.pem'), 'utf8'), renewedCert, 'the renewed certificate is the one in use');
  secondStop.stop();
  t.equal(await again, 0);

  // The state directory belongs to `cli`: another name is refused.
  const wrongName = capture();
  t.equal(await main([...base.map((a) => (a === 'cli' ? 'other' : a))], { ...hooks, io: wrongName.io }), 1);
  t.match(wrongName.text(), `${ErrorCodes.AGENT_STATE}: ${stateDir} holds the identity of agent "cli"`);

  // A pre-issued identity: the same files, given explicitly.
  const files = join(await tempDir(t, 'cli-files'), 'id');
  await writeFile(`${files}-cert.pem`, renewedCert);
  await writeFile(`${files}-key.pem`, await readFile(join(stateDir, 'agent-key.pem')));
  const preIssued = capture();
  const preStop = stopper();
  const held = main(
    [
      '--proxy',
      proxy,
      '--server-name',
      'localhost',
      '--name',
      'cli',
      '--allow',
      target,
      '--log-level',
      'silent',
      '--cert',
      `${files}-cert.pem`,
      '--key',
      `${files}-key.pem`,
      '--ca',
      gate.caFile,
    ],
    { ...hooks, io: preIssued.io, stopSignal: preStop.signal },
  );
  await until(() => preIssued.out.some((l) => l.startsWith('tunnel up')), 'up with a pre-issued identity', 20_000);
  t.match(new X509Certificate(renewedCert).subject, /CN=cli/);
  preStop.stop();
  t.equal(await held, 0);

  // Report-only: which way the tunnel endpoint is reached, then exit.
  const report = capture();
  t.equal(await main(['--proxy', proxy, '--server-name', 'localhost', '--ca', gate.caFile], { io: report.io }), 0, report.text());
  t.equal(report.out[0], `connected to ${proxy} direct, ALPN gate-reversetunnel-framed`);
  const unreachable = capture();
  t.equal(await main(['--proxy', '127.0.0.1:1', '--insecure', '--timeout-ms', '2000'], { io: unreachable.io }), 1);
  t.match(unreachable.text(), /agent: GATE_ERR_DIAL_REFUSED: /);
});

t.test('--config: the file gives the flags, flags override it, --allow adds to it', async (t) => {
  const file = join(await tempDir(t, 'cli-config'), 'agent.yaml');
  // A file that does not load stops the agent before anything is dialled, naming key and line.
  await writeFile(file, 'proxy: 127.0.0.1:1\nname: cli\nconnection_count: 0\n');
  const bad = capture();
  t.equal(await main(['--config', file], { io: bad.io }), 1);
  t.match(
    bad.text(),
    /agent: GATE_ERR_CONFIG_INVALID: invalid configuration .*agent\.yaml:\n {2}line 3: connection_count: expected a whole number from 1 to 64/,
  );
  const missing = capture();
  t.equal(await main(['--config', `${file}.absent`], { io: missing.io }), 1);
  t.match(missing.text(), /cannot read the file: ENOENT/);

  // The file names an unreachable proxy and one resource; the --proxy flag wins over the first, and
  // --allow adds a target to the second. The join's name, token and pin come from the file.
  const tagged = await startTaggedTcpServer('cli-config-target');
  t.teardown(() => closeServer(tagged.server));
  const gate = await startGateProxy(t, { mode: 'multiplex', upstreams: { redis: `tunnel:cli-config/127.0.0.1:${tagged.port}` } });
  const proxy = `127.0.0.1:${gate.port('multiplex')}`;
  const stateDir = join(await tempDir(t, 'cli-config-state'), 'state');
  const token = (await readFile(gate.proxy.devTokenFile!, 'utf8')).trim();
  await writeFile(
    file,
    [
      'proxy: 127.0.0.1:1',
      'server_name: localhost',
      'name: cli-config',
      `state_dir: ${stateDir}`,
      `token: ${token}`,
      `ca_pin: ${gate.proxy.caPin}`,
      'resources:',
      '  - kind: db',
      '    name: orders',
      '    target: 127.0.0.1:9',
      'log_level: silent',
      '',
    ].join('\n'),
  );
  const run = capture();
  const stop = stopper();
  const running = main(['--config', file, '--proxy', proxy, '--allow', `127.0.0.1:${tagged.port}`], {
    env: {},
    io: run.io,
    stopSignal: stop.signal,
  });
  await until(() => run.out.some((l) => l.startsWith('tunnel up: agent cli-config')), "up through the flag's proxy", 20_000);
  t.match(run.text(), /joined as cli-config/);
  const client = await tlsClient(gate.port('multiplex'), { servername: 'localhost', ca: gate.ca, ALPNProtocols: ['gate-redis'] });
  t.equal(
    (await readUntil(client, (s) => s.includes('\n'))).trim(),
    'cli-config-target',
    "the --allow flag adds a target to the file's resources",
  );
  client.destroy();
  t.same(
    gate.proxy.tunnels.describedAgent('cli-config')?.description?.services,
    [{ kind: 'db', name: 'orders' }],
    'each resource of the file announced as a service',
  );
  stop.stop();
  t.equal(await running, 0);
});
