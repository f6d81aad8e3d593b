// Child processes of the bench: pinned to CPUs with taskset, their stderr kept in a log file,
// always stopped (SIGTERM, then SIGKILL) and never left behind when the runner exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

export interface SpawnOptions {
  /** taskset CPU list ("0", "1", "0,1"); undefined runs unpinned. */
  cpus: string | undefined;
  env?: Record<string, string>;
  /** File that receives the child's stderr (and stdout unless `stdout` is 'pipe'). */
  log: string;
  stdout?: 'pipe' | 'log';
  stdin?: 'pipe' | 'ignore';
}

export function spawnPinned(command: string, args: string[], options: SpawnOptions): ChildProcess {
  const [cmd, argv] = options.cpus === undefined ? [command, args] : ['taskset', ['-c', options.cpus, command, ...args]];
  // taskset execs the command, so the child's pid is the measured process itself.
  const child = spawn(cmd, argv, {
    env: { ...process.env, ...options.env },
    stdio: [options.stdin ?? 'ignore', options.stdout === 'pipe' ? 'pipe' : 'pipe', 'pipe'],
  });
  const log = createWriteStream(options.log, { flags: 'a' });
  child.stderr?.pipe(log);
  if (options.stdout !== 'pipe') child.stdout?.pipe(log);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

function tryConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Waits until 127.0.0.1:port accepts TCP, polling for at most `timeoutMs`. */
export async function waitForPort(port: number, child: ChildProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`process exited with code ${child.exitCode} before listening on ${port}`);
    if (await tryConnect(port)) return;
    await sleep(50);
  }
  throw new Error(`nothing listening on ${port} after ${timeoutMs} ms`);
}

/** JSON lines from a child's stdout, read in order. */
export class JsonLines {
  private readonly queue: string[] = [];
  private waiter: ((line: string | undefined) => void) | undefined;
  private ended = false;

  constructor(private readonly child: ChildProcess) {
    let text = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n')) {
        this.push(text.slice(0, nl));
        text = text.slice(nl + 1);
      }
    });
    child.once('exit', () => {
      this.ended = true;
      this.waiter?.(undefined);
    });
  }

  private push(line: string): void {
    if (this.waiter) this.waiter(line);
    else this.queue.push(line);
  }

  /** The next line parsed as JSON; rejects after `timeoutMs` or when the child exits first. */
  next<T>(timeoutMs: number): Promise<T> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(JSON.parse(queued) as T);
    if (this.ended) return Promise.reject(new Error(`process exited (code ${this.child.exitCode}) without output`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`no output within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = (line) => {
        clearTimeout(timer);
        this.waiter = undefined;
        if (line === undefined) reject(new Error(`process exited (code ${this.child.exitCode}) without output`));
        else {
          try {
            resolve(JSON.parse(line) as T);
          } catch (err) {
            reject(err as Error);
          }
        }
      };
    });
  }
}

/** A free TCP port on 127.0.0.1 (bind 0, read, close: a small race the bench can live with). */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
