import { spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort, type Teardownable } from './daemon.js';
import { findBinary, requirePeer } from './peers.js';
import { run } from './net.js';

export interface RunningPostgres {
  host: string;
  port: number;
  /** Superuser, trusted from 127.0.0.1 without a password. */
  user: string;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/** uid/gid of the `postgres` account when we are root (initdb and postgres refuse to run as root). */
async function runAs(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const { stdout, code } = await run('id', ['-u', 'postgres']);
  const gid = await run('id', ['-g', 'postgres']);
  if (code !== 0 || gid.code !== 0) throw new Error('running as root and there is no postgres account to run PostgreSQL as');
  return { uid: Number(stdout.trim()), gid: Number(gid.stdout.trim()) };
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

/**
 * A throwaway PostgreSQL (Debian `postgresql`): initdb in a temp dir (trust auth, no fsync), then
 * `postgres -D dir -h 127.0.0.1 -p PORT -k dir` in the foreground, as the `postgres` account when
 * we are root. Teardown stops it with SIGINT (fast shutdown: SIGTERM would wait for clients), then
 * SIGKILL, and removes the directory. Undefined when the peer is missing (requirePeer skips or fails).
 */
export async function startPostgres(t: PeerTest): Promise<RunningPostgres | undefined> {
  const postgres = requirePeer(t, 'postgres', 'postgresql');
  const initdb = findBinary('initdb');
  if (!postgres) return undefined;
  if (!initdb) throw new Error('postgres found but not initdb');
  const owner = await runAs();
  const dir = await mkdtemp(join(tmpdir(), 'gate-postgres-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  if (owner) await chown(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const user = owner ? 'postgres' : userInfo().username;
  const init = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
    const child = spawn(initdb, ['-D', data, '-A', 'trust', '-U', user, '--no-sync', '--no-instructions', '-E', 'UTF8'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(owner ?? {}),
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out }));
  });
  if (init.code !== 0) throw new Error(`initdb failed:\n${init.out}`);

  const host = '127.0.0.1';
  const port = await freePort(host);
  const child: ChildProcess = spawn(postgres, ['-D', data, '-h', host, '-p', String(port), '-k', dir, '-c', 'fsync=off', '-c', 'max_connections=20'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(owner ?? {}),
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
    child.kill('SIGINT');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exit, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5000)))]);
    clearTimeout(timer);
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
    }
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exited) throw new Error(`postgres exited before accepting:\n${out}`);
    // Accepting TCP is not enough: during recovery it answers "the database system is starting up".
    if (await accepts(host, port)) {
      const probe = await run('psql', ['-h', host, '-p', String(port), '-U', user, '-d', 'postgres', '-Atc', 'select 1'], { timeoutMs: 5000 });
      if (probe.code === 0) break;
    }
    if (Date.now() > deadline) throw new Error(`postgres did not become ready in time:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { host, port, user, output: () => out };
}
