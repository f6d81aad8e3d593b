import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { requirePeer } from '../helpers/peers.js';
import { closeServer, readUntil, run, startTaggedTcpServer, tcpClient } from '../helpers/net.js';

const EXAMPLE = fileURLToPath(new URL('../../examples/proxy.js', import.meta.url));

interface Started {
  child: ChildProcess;
  output: () => string;
}

/** Starts the example proxy and waits for its "try:" line (it prints that once it listens). */
async function startExample(t: Test, args: string[], cwd: string): Promise<Started> {
  const child = spawn(process.execPath, [EXAMPLE, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await readUntil(child.stdout!, () => output.includes('try: curl'));
  child.stdout!.resume();
  return { child, output: () => output };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  return code;
}

t.test('npm start on the embedded default configuration answers curl --cacert on 127.0.0.1:3080', async (t) => {
  const curl = requirePeer(t, 'curl', 'curl');
  if (!curl) return;
  const cwd = mkdtempSync(join(tmpdir(), 'gate-example-'));
  const { child, output } = await startExample(t, [], cwd);
  t.match(output(), /listening on 127\.0\.0\.1:3080 \(multiplex/);
  const ca = join(cwd, '.data', 'ca.pem');
  t.match(output(), `development CA: .data/ca.pem`);
  t.match(output(), /agents: CA pin sha256:[0-9a-f]{64}\n/, 'the CA pin is printed');
  t.match(
    output(),
    /node dist\/examples\/agent\.js --proxy localhost:3080 --ca-pin sha256:[0-9a-f]{64} --token "\$\(cat \.data\/join-token\)" --name local-agent --allow 127\.0\.0\.1:5432 --state-dir \.agent-local-agent/,
    'a ready-to-paste agent command for the configured agent',
  );
  t.notOk(output().includes(readFileSync(join(cwd, '.data', 'join-token'), 'utf8').trim()), 'the token itself is not printed');
  const ping = await run(curl, ['-sS', '--cacert', ca, 'https://127.0.0.1:3080/webapi/ping']);
  t.equal(ping.code, 0, ping.stderr);
  t.match(JSON.parse(ping.stdout), { proxy: { tls_routing_enabled: true, ssh: { listen_addr: '127.0.0.1:3080' } }, server_version: '0.1.0' });
  t.equal(await stop(child), 0, 'SIGTERM drains and exits 0');

  // A second start keeps the CA (clients that trust it keep working) and issues a fresh server cert.
  const caBefore = readFileSync(ca, 'utf8');
  const again = await startExample(t, [], cwd);
  t.equal(readFileSync(ca, 'utf8'), caBefore, 'the CA made at first start is reused');
  const second = await run(curl, ['-sS', '--cacert', ca, 'https://localhost:3080/v1/webapi/automaticupgrades/channel/stable/cloud/version']);
  t.equal(second.stdout, 'v0.1.0');
  t.equal(await stop(again.child), 0);
});

t.test('--config and --pid-file; SIGHUP switches a route while a connection stays open', async (t) => {
  const one = await startTaggedTcpServer('SSH-2.0-one');
  const two = await startTaggedTcpServer('SSH-2.0-two');
  t.teardown(async () => {
    for (const s of [...one.sockets, ...two.sockets]) s.destroy();
    await Promise.all([closeServer(one.server), closeServer(two.server)]);
  });
  const dir = mkdtempSync(join(tmpdir(), 'gate-example-'));
  const config = join(dir, 'gate.yaml');
  const pidFile = join(dir, 'gate.pid');
  const yaml = (sshPort: number) =>
    `version: v3\ndata_dir: ${join(dir, 'data')}\nproxy_service:\n  web_listen_addr: 127.0.0.1:0\n  upstreams:\n    ssh: 127.0.0.1:${sshPort}\n`;
  writeFileSync(config, yaml(one.port));
  const { child, output } = await startExample(t, ['--config', config, '--pid-file', pidFile], dir);
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

  t.equal(await stop(child), 0);
  t.notOk(existsSync(pidFile), 'pid file removed on exit');
});
