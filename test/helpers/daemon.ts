import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';

/** What a helper needs from a tap test: somewhere to register cleanup. */
export interface Teardownable {
  teardown(fn: () => unknown): void;
}

/** A free TCP port on `host` (bind to port 0, read it, release it). */
export async function freePort(host: string): Promise<number> {
  return (await freePorts(host, 1))[0]!;
}

/**
 * `count` distinct free TCP ports on `host`: all bound at once, then released, so two of them are
 * never the same (one port at a time, the kernel may hand out a port it just released again).
 */
export async function freePorts(host: string, count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve, reject) => {
            server.once('error', reject);
            server.listen(0, host, () => {
              const address = server.address();
              if (typeof address === 'object' && address) resolve(address.port);
              else reject(new Error('no port'));
            });
          }),
      ),
    );
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => (server.listening ? server.close(resolve) : resolve(undefined)))));
  }
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface Daemon {
  child: ChildProcess;
  /** stdout + stderr so far, for failure messages. */
  output(): string;
}

export interface DaemonSpec {
  command: string;
  args: string[];
  host: string;
  port: number;
  readyTimeoutMs?: number;
  killAfterMs?: number;
  cwd?: string;
  /** Run as this user/group (a root test starting a server that refuses root, e.g. PostgreSQL). */
  uid?: number;
  gid?: number;
  env?: NodeJS.ProcessEnv;
  /** Signal for a quick stop (default SIGTERM; PostgreSQL's "fast shutdown" is SIGINT). */
  stopSignal?: NodeJS.Signals;
}

/**
 * Spawns a daemon in the foreground, waits until `host:port` accepts a connection (or the child
 * exits, or `readyTimeoutMs` passes: then throws with its output), and registers a teardown that
 * sends `stopSignal` (SIGTERM), then SIGKILL if it has not exited within `killAfterMs`.
 */
export async function startDaemon(t: Teardownable, spec: DaemonSpec): Promise<Daemon> {
  const child = spawn(spec.command, spec.args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(spec.cwd ? { cwd: spec.cwd } : {}),
    ...(spec.uid !== undefined ? { uid: spec.uid } : {}),
    ...(spec.gid !== undefined ? { gid: spec.gid } : {}),
    ...(spec.env ? { env: spec.env } : {}),
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  t.teardown(async () => {
    if (exited) return;
    child.kill(spec.stopSignal ?? 'SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exit, new Promise<void>((resolve) => (timer = setTimeout(resolve, spec.killAfterMs ?? 3000)))]);
    clearTimeout(timer);
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
    }
  });
  const deadline = Date.now() + (spec.readyTimeoutMs ?? 10_000);
  for (;;) {
    if (exited) throw new Error(`${spec.command} exited before accepting on ${spec.host}:${spec.port}:\n${out}`);
    if (await accepts(spec.host, spec.port)) break;
    if (Date.now() > deadline) throw new Error(`${spec.command} did not accept on ${spec.host}:${spec.port} in time:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, output: () => out };
}
