// The agent example and `gate-mux local-proxy`, run as a user would, against local peers.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { devCertificates } from '../../lib/pki/dev-certificates.js';
import { startTlsEchoServer } from '../helpers/echo-servers.js';
import { startFakeProxy, tunnelTo } from '../helpers/fake-proxy.js';

const example = (name: string): string => fileURLToPath(new URL(`../../examples/${name}.js`, import.meta.url));
const GATE_MUX = fileURLToPath(new URL('../../lib/cli/gate-mux.js', import.meta.url));

async function caFile(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gate-examples-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'ca.pem');
  await writeFile(path, devCertificates().ca.cert);
  return path;
}

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

t.test('agent example: direct for loopback, through HTTPS_PROXY (redacted) otherwise', async (t) => {
  const ca = await caFile(t);
  const server = await startTlsEchoServer(t, { alpn: ['gate-reversetunnel-framed'] });
  const proxy = await startFakeProxy(t, tunnelTo(server.address));
  const env = { PATH: process.env.PATH, HTTPS_PROXY: `http://agent:Sup3rSecret@${proxy.host}:${proxy.port}` };
  const direct = await run([example('agent'), '--proxy', server.address, '--ca', ca, '--server-name', 'localhost'], env);
  t.equal(direct.code, 0, direct.stderr);
  t.equal(direct.stdout.trim(), `connected to ${server.address} direct, ALPN gate-reversetunnel-framed`);
  const proxied = await run([example('agent'), '--proxy', `tunnel.gate.test:${server.port}`, '--ca', ca], env);
  t.equal(proxied.code, 0, proxied.stderr);
  t.equal(
    proxied.stdout.trim(),
    `connected to tunnel.gate.test:${server.port} via http://agent:***@${proxy.host}:${proxy.port} (from HTTPS_PROXY), ALPN gate-reversetunnel-framed`,
  );
  const refused = await run([example('agent'), '--proxy', `tunnel.gate.test:${server.port}`, '--ca', ca], {
    ...env,
    HTTPS_PROXY: 'http://localhost:3128',
  });
  t.equal(refused.code, 1);
  t.match(refused.stderr, /GATE_ERR_PROXY_ENV_INVALID.*another DNS name or a private IP/);
});

t.test('gate-mux local-proxy: prints where it listens, tunnels, exits on SIGTERM', async (t) => {
  const ca = await caFile(t);
  const server = await startTlsEchoServer(t, { alpn: ['gate-postgres'] });
  const child = spawn(
    process.execPath,
    [
      GATE_MUX,
      'local-proxy',
      '--listen',
      '127.0.0.1:0',
      '--proxy',
      server.address,
      '--alpn',
      'gate-postgres',
      '--ca',
      ca,
      '--server-name',
      'localhost',
    ],
    { env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    void exited.then((code) => reject(new Error(`local-proxy exited ${code}: ${err}`)));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0] ?? '');
    });
  });
  const match = /^listening on 127\.0\.0\.1:(\d+) -> (\S+) \(ALPN gate-postgres, direct\)$/.exec(line);
  t.ok(match, line);
  t.equal(match?.[2], server.address);
  const reply = await new Promise<string>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(match?.[1]) }, () => socket.write('via example'));
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += d.toString();
      if (got.length >= 11) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.once('error', reject);
  });
  t.equal(reply, 'via example');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'clean exit on SIGTERM');
});
