// Every ts/js code block of README.md and docs/ is either a file under examples/docs/ (compiled
// with the project, strictly, and run here against real clients) or says, in an HTML comment
// just before it, why it is not run. A block edited in the docs but not in its file, or the
// reverse, fails here; so does an example file no block shows, or one no test below runs.
import t, { type Test } from 'tap';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as http2Connect } from 'node:http2';
import { join, relative, resolve } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { devCertificates, dialTls } from '../../lib/index.js';
import { startGateProxy } from '../helpers/gate-proxy.js';
import { codeBlocks } from '../helpers/markdown.js';
import { closeServer, echoOnce, readBytes, readUntil, run, startTaggedTcpServer, startTaggedTlsServer } from '../helpers/net.js';
import { requirePeer } from '../helpers/peers.js';
import { tempDir } from '../helpers/temp-dir.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const CODE = new Set(['ts', 'typescript', 'js', 'javascript']);
const EXAMPLE_NOTE = /^example: (examples\/docs\/[\w-]+\.ts)$/;
const NOT_RUN_NOTE = /^not run: \S.{9,}/s;

function markdownFiles(): string[] {
  const docs = readdirSync(resolve(root, 'docs'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.md'));
  return ['README.md', ...docs.map((f) => join('docs', f))];
}

/** Starts a compiled example in `cwd`, listening on loopback; resolves the port it prints. */
async function startExample(t: Test, file: string, cwd: string, env: NodeJS.ProcessEnv = {}): Promise<number> {
  const child = spawn(process.execPath, [resolve(root, 'dist', file.replace(/\.ts$/, '.js'))], {
    cwd,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGINT');
    await once(child, 'exit');
  });
  const banner = await readUntil(child.stdout!, (s) => /listening on port \d+/.test(s));
  return Number(/listening on port (\d+)/.exec(banner)![1]);
}

/** Runs a compiled example to its end in `cwd` with `env` added; resolves its output. */
async function runExample(file: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ stdout: string; stderr: string }> {
  const script = resolve(root, 'dist', file.replace(/\.ts$/, '.js'));
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return promisify(execFile)(process.execPath, [script], { cwd, env: { ...clean, ...env }, timeout: 20_000 });
}

type Runner = (t: Test, file: string) => Promise<void>;
const runners: Record<string, Runner> = {
  'examples/docs/multiplexer-in-20-lines.ts': async (t, file) => {
    const curl = requirePeer(t, 'curl', 'curl');
    if (!curl) return;
    const { server, ca } = devCertificates();
    const dir = await tempDir(t, 'example');
    writeFileSync(join(dir, 'server.pem'), server.cert);
    writeFileSync(join(dir, 'server-key.pem'), server.key);
    const port = await startExample(t, file, dir);
    const get = async (...args: string[]) => (await run(curl, ['-sS', '--max-time', '10', ...args])).stdout;
    // curl over TLS offers h2 first; the example must answer it in HTTP/2, not hand it to HTTP/1.
    t.equal(await get('-k', `https://127.0.0.1:${port}/`), 'hello over HTTP/2.0\n', 'curl https (HTTP/2 by default)');
    t.equal(await get('-k', '--http1.1', `https://127.0.0.1:${port}/`), 'hello over HTTP/1.1\n', 'curl --http1.1 https');
    t.equal(await get(`http://127.0.0.1:${port}/`), 'hello over HTTP/1.1\n', 'curl http (plaintext HTTP/1.1)');
    t.equal(await get('--http2-prior-knowledge', `http://127.0.0.1:${port}/`), 'hello over HTTP/2.0\n', 'curl h2c prior knowledge');

    const session = http2Connect(`https://127.0.0.1:${port}`, { ca: ca.cert });
    t.teardown(() => session.close());
    const stream = session.request({ ':path': '/' });
    let body = '';
    stream.setEncoding('utf8').on('data', (d: string) => (body += d));
    const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
    await once(stream, 'end');
    t.equal(headers[':status'], 200, 'node:http2 client: status 200');
    t.equal(body, 'hello over HTTP/2.0\n', 'node:http2 client: the body');

    const audit = tlsConnect({ host: '127.0.0.1', port, ca: ca.cert, servername: 'localhost', ALPNProtocols: ['x-audit'] });
    let said = '';
    audit.setEncoding('utf8').on('data', (d: string) => (said += d));
    await once(audit, 'end');
    t.equal(said, '127.0.0.1\n', 'the audit route answers the client its address, inside TLS');
    audit.destroy();
  },

  'examples/docs/updater-decision.ts': async (t, file) => {
    // A real proxy whose stable/cloud channel serves a newer, critical version.
    const dir = await tempDir(t, 'example');
    const gate = await startGateProxy(t, {
      mode: 'multiplex',
      upstreams: {},
      version: '1.2.3',
      proxyService: { automatic_upgrades_channels: { 'stable/cloud': { static_version: 'v1.2.4', critical: true } } },
    });
    writeFileSync(join(dir, 'ca.pem'), gate.ca);
    const { stdout } = await runExample(file, dir, { GATE_PROXY: `https://${gate.address('multiplex')}` });
    t.equal(stdout, 'critical: upgrade to 1.2.4 now\n', 'a critical version is installed at once, whatever the schedule');
  },

  'examples/docs/tunnel-in-one-process.ts': async (t, file) => {
    const database = await startTaggedTcpServer('database');
    t.teardown(() => closeServer(database.server));
    const port = await startExample(t, file, await tempDir(t, 'example'), { TARGET: `127.0.0.1:${database.port}` });
    // The example makes its own CA, so the client checks the chain's issuer rather than a file.
    const client = tlsConnect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      ALPNProtocols: ['gate-postgres'],
      rejectUnauthorized: false,
    });
    t.teardown(() => client.destroy());
    await once(client, 'secureConnect');
    t.equal(client.getPeerCertificate().issuer.CN, 'gate-mux development CA', 'TLS ended by the proxy with the example CA');
    t.equal(await readBytes(client, 'database\n'.length), 'database\n', 'the database answers through the agent');
    t.equal(await echoOnce(client, 'ping\n'), 'ping\n', 'bytes flow both ways through the tunnel');
  },

  'examples/docs/connection-upgrade.ts': async (t, file) => {
    const { server, ca } = devCertificates();
    const database = await startTaggedTlsServer('database');
    t.teardown(() => closeServer(database.server));
    const dir = await tempDir(t, 'example');
    writeFileSync(join(dir, 'server.pem'), server.cert);
    writeFileSync(join(dir, 'server-key.pem'), server.key);
    const port = await startExample(t, file, dir, { TARGET: `127.0.0.1:${database.port}` });
    // The client as through an L7 balancer: its own TLS (to the database) inside the WebSocket upgrade.
    const { socket, upgraded, alpn } = await dialTls(`127.0.0.1:${port}`, {
      alpn: ['gate-postgres'],
      serverName: 'localhost',
      ca: ca.cert,
      proxy: null,
      connectionUpgrade: { mode: true, loadBalancerCa: ca.cert },
    });
    t.teardown(() => socket.destroy());
    t.ok(upgraded, 'the TLS went inside the connection upgrade');
    t.equal(alpn, 'gate-postgres');
    const greeting = await readUntil(socket, (s) => s.includes('\n'));
    t.match(greeting, /^database sni=localhost alpn=gate-postgres\n/, 'routed by the inner ClientHello');
    const curl = requirePeer(t, 'curl', 'curl');
    const web = curl ? await run(curl, ['-sS', '-k', `https://127.0.0.1:${port}/`]) : undefined;
    if (web) t.equal(web.stdout, 'web\n', 'plain HTTPS still reaches the web server');
  },
};

for (const [file, runner] of Object.entries(runners)) t.test(`${relative('.', file)} runs as the docs show it`, (t) => runner(t, file));

const shown = new Set<string>();
t.test('each code block of the docs is an example file, or says why it is not run', async (t) => {
  for (const file of markdownFiles()) {
    for (const block of codeBlocks(readFileSync(resolve(root, file), 'utf8'))) {
      if (!CODE.has(block.language)) continue;
      const where = `${file}:${block.line}`;
      const example = block.note === undefined ? null : EXAMPLE_NOTE.exec(block.note);
      if (example) {
        const source = readFileSync(resolve(root, example[1]!), 'utf8');
        t.equal(block.code, source, `${where} is ${example[1]} verbatim`);
        shown.add(example[1]!);
      } else {
        const why = 'names its example file (<!-- example: examples/docs/….ts -->) or says why it is not run (<!-- not run: … -->)';
        t.match(block.note ?? '', NOT_RUN_NOTE, `${where} ${why}`);
      }
    }
  }
  const files = readdirSync(resolve(root, 'examples/docs'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `examples/docs/${f}`);
  t.same(
    files.filter((f) => !shown.has(f)),
    [],
    'every examples/docs file is shown in the docs',
  );
  t.same(files.filter((f) => !(f in runners)).sort(), [], 'every examples/docs file is run below');
});
