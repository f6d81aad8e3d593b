import { execFile } from 'node:child_process';
import { chown } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { run } from './net.js';
import { findBinary, requirePeer } from './peers.js';
import { isRoot, systemUser } from './system-user.js';
import { tempDir } from './temp-dir.js';

const execFileAsync = promisify(execFile);

export interface RunningPostgres {
  host: string;
  port: number;
  /** The superuser initdb created; every 127.0.0.1 connection is trusted (`initdb -A trust`). */
  user: string;
  database: string;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * A throwaway PostgreSQL (Debian `postgresql`): `initdb` into a temp dir, then `postgres` in the
 * foreground on 127.0.0.1 and a free port, its Unix socket in the same dir, durability off (a
 * test cluster). PostgreSQL refuses to run as root, so a root test runs it as the `postgres`
 * account the package creates. Every local TCP client is trusted: the multiplexer is what the
 * tests are about, not Postgres authentication. Stopped with SIGINT ("fast shutdown": open
 * sessions are ended rather than waited for). Undefined when the peer is missing.
 */
export async function startPostgres(t: PeerTest): Promise<RunningPostgres | undefined> {
  const postgres = requirePeer(t, 'postgres', 'postgresql');
  const initdb = findBinary('initdb');
  if (!postgres || !initdb) return undefined;
  let owner: { uid: number; gid: number } | undefined;
  if (isRoot()) {
    owner = systemUser('postgres');
    if (!owner) {
      if (process.env.CI) t.fail('PostgreSQL refuses root and there is no postgres account');
      else t.skip('PostgreSQL refuses root and there is no postgres account', () => {});
      return undefined;
    }
  }
  const dir = await tempDir(t, 'postgres');
  if (owner) await chown(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C' };
  await execFileAsync(initdb, ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync', '--no-instructions'], {
    ...as,
    cwd: dir,
    env,
  });
  const host = '127.0.0.1';
  const port = await freePort(host);
  const settings = [
    'fsync=off',
    'synchronous_commit=off',
    'full_page_writes=off',
    'shared_buffers=16MB',
    'max_connections=30',
    'log_min_messages=warning',
  ];
  const daemon = await startDaemon(t, {
    command: postgres,
    args: ['-D', data, '-k', dir, '-h', host, '-p', String(port), ...settings.flatMap((s) => ['-c', s])],
    host,
    port,
    cwd: dir,
    env,
    ...as,
    stopSignal: 'SIGINT',
    readyTimeoutMs: 30_000,
  });
  return { host, port, user: 'postgres', database: 'postgres', output: daemon.output };
}

/**
 * Whether exactly one session of `pg` is running a query that matches `pattern` (SQL LIKE), asked
 * of PostgreSQL itself with `psql` straight to its port: proof that a query sent through the
 * proxy reached the database and is still running there.
 */
export async function queryRunning(pg: RunningPostgres, psql: string, pattern: string): Promise<boolean> {
  const sql = `select count(*) from pg_stat_activity where query like '${pattern}'`;
  const args = ['-h', pg.host, '-p', String(pg.port), '-U', pg.user, '-d', pg.database, '-Atc', sql];
  const seen = await run(psql, args, { env: { ...process.env, PGSSLMODE: 'disable' } });
  return seen.stdout.trim() === '1';
}
