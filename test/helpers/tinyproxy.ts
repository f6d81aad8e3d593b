import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBinary } from './peers.js';

/**
 * A real tinyproxy (HTTP forward proxy with CONNECT) on 127.0.0.2 and a free port, for tests of
 * clients that go through HTTPS_PROXY. 127.0.0.2 rather than 127.0.0.1 because clients refuse a
 * proxy on `localhost`/127.0.0.1 (DESIGN §4). Callers check the binary first with
 * `requirePeer(t, 'tinyproxy', 'tinyproxy')` and call `stop()` in `t.teardown`.
 */
export interface Tinyproxy {
  /** `http://[user:password@]127.0.0.2:<port>` */
  url: string;
  host: string;
  port: number;
  /** Everything tinyproxy logged so far (connection and request lines: proof traffic went through it). */
  output(): string;
  stop(): Promise<void>;
}

export interface TinyproxyOptions {
  /** Require `Proxy-Authorization: Basic` with these credentials. */
  basicAuth?: { user: string; password: string };
}

const HOST = '127.0.0.2';

async function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function startOnce(binary: string, dir: string, options: TinyproxyOptions): Promise<Tinyproxy | undefined> {
  const port = await freePort(HOST);
  const config = join(dir, 'tinyproxy.conf');
  const lines = [
    `Port ${port}`,
    `Listen ${HOST}`,
    'Timeout 30',
    'MaxClients 50',
    'Allow 127.0.0.0/8',
    'LogLevel Connect',
    `PidFile "${join(dir, 'tinyproxy.pid')}"`,
    // No ConnectPort line: CONNECT to any port (test servers use ephemeral ones).
  ];
  if (options.basicAuth) lines.push(`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`);
  await writeFile(config, `${lines.join('\n')}\n`);

  // -d: stay in the foreground (logs to stderr), so the child is ours to kill.
  const child = spawn(binary, ['-d', '-c', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.once('error', () => {}); // reported through the exit check below

  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return undefined; // e.g. port taken: retry
    if (await canConnect(HOST, port)) {
      const auth = options.basicAuth
        ? `${encodeURIComponent(options.basicAuth.user)}:${encodeURIComponent(options.basicAuth.password)}@`
        : '';
      return {
        url: `http://${auth}${HOST}:${port}`,
        host: HOST,
        port,
        output: () => output,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill('SIGTERM');
            const killer = setTimeout(() => child.kill('SIGKILL'), 2000);
            await exited(child);
            clearTimeout(killer);
          }
        },
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  child.kill('SIGKILL');
  await exited(child);
  throw new Error(`tinyproxy did not start listening on ${HOST}:${port}:\n${output}`);
}

export async function startTinyproxy(options: TinyproxyOptions = {}): Promise<Tinyproxy> {
  const binary = findBinary('tinyproxy');
  if (!binary) throw new Error('tinyproxy not found: apt-get install tinyproxy');
  const dir = await mkdtemp(join(tmpdir(), 'gate-tinyproxy-'));
  try {
    // The free port is found before tinyproxy binds it; another process may take it in between.
    for (let attempt = 0; attempt < 3; attempt++) {
      const proxy = await startOnce(binary, dir, options);
      if (proxy) {
        return {
          ...proxy,
          stop: async () => {
            await proxy.stop();
            await rm(dir, { recursive: true, force: true });
          },
        };
      }
    }
    throw new Error('tinyproxy exited at start three times');
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
