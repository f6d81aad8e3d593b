// examples/agent.js holding a real tunnel in its own process, then killed with SIGKILL mid-stream:
// the proxy must close that agent's client connections at once with GATE_ERR_AGENT_STREAM_FAILED.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../lib/errors.js';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { closeServer, listening, readUntil, tlsClient, until } from '../helpers/net.js';
import { agentCertificate, startProxySide } from '../helpers/tunnel-rig.js';

t.test('the agent example holds a tunnel; SIGKILL fails its streams fast', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'gate-agent-example-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pair = agentCertificate('example-agent');
  await writeFile(join(dir, 'ca.pem'), devCertificates().ca.cert);
  await writeFile(join(dir, 'agent.pem'), pair.cert);
  await writeFile(join(dir, 'agent-key.pem'), pair.key, { mode: 0o600 });

  const sockets = new Set<Socket>();
  const echo = createServer((s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.write('resource\n');
    s.pipe(s);
  });
  const target = `127.0.0.1:${await listening(echo)}`;
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return closeServer(echo);
  });
  const proxy = await startProxySide([{ alpn: 'gate-redis', agent: 'example-agent', target }]);
  t.teardown(() => proxy.close());

  const script = fileURLToPath(new URL('../../examples/agent.js', import.meta.url));
  const child = spawn(
    process.execPath,
    [
      script,
      '--proxy',
      `127.0.0.1:${proxy.port}`,
      '--server-name',
      'localhost',
      '--ca',
      join(dir, 'ca.pem'),
      '--name',
      'example-agent',
      '--cert',
      join(dir, 'agent.pem'),
      '--key',
      join(dir, 'agent-key.pem'),
      '--allow',
      target,
    ],
    { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = once(child, 'exit');
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const line = await readUntil(child.stdout, (s) => s.includes('\n'));
  t.equal(line.trim(), 'tunnel up: agent example-agent via direct (connection 1)', stderr);
  await proxy.registry.waitFor('example-agent');

  const client = await tlsClient(proxy.port, { servername: 'localhost', ALPNProtocols: ['gate-redis'] });
  t.equal((await readUntil(client, (s) => s.includes('\n'))).trim(), 'resource');
  let clientError: Error | undefined;
  client.on('error', (err) => (clientError = err));
  const clientClosed = once(client, 'close');

  child.kill('SIGKILL');
  await exited;
  await clientClosed; // closed by the proxy, without any byte from us
  t.equal(clientError, undefined, 'a clean close for the client (the reason is in the proxy log)');
  await until(() => proxy.mux.stats().failures[ErrorCodes.AGENT_STREAM_FAILED] === 1, 'the failure recorded with its code');
  await until(() => !proxy.registry.has('example-agent'), 'the agent unregistered');
  t.pass('agent removed from the registry');
});
