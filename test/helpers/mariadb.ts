import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { findBinary, requirePeer } from './peers.js';
import { isRoot } from './system-user.js';
import { tempDir } from './temp-dir.js';

const execFileAsync = promisify(execFile);

export interface RunningMariadb {
  host: string;
  port: number;
  user: string;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * A throwaway MariaDB (Debian `mariadb-server`): `mariadb-install-db` into a temp dir, then
 * `mariadbd` in the foreground on 127.0.0.1 and a free port, with no option files read
 * (`--no-defaults`, so the machine's /etc/mysql does not leak in) and `--skip-grant-tables`
 * (any user, no password: the tests are about the multiplexer, not MySQL accounts). The server
 * still sends its handshake first, which is what matters for routing. Undefined when the peer
 * is missing.
 */
export async function startMariadb(t: PeerTest): Promise<RunningMariadb | undefined> {
  const mariadbd = requirePeer(t, 'mariadbd', 'mariadb-server');
  const install = findBinary('mariadb-install-db');
  if (!mariadbd || !install) return undefined;
  const dir = await tempDir(t, 'mariadb');
  const data = join(dir, 'data');
  // mariadbd refuses to run as root unless told which user to be; as root, stay root (temp dir).
  const asUser = isRoot() ? ['--user=root'] : [];
  await execFileAsync(
    install,
    ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...asUser],
    { cwd: dir },
  );
  const host = '127.0.0.1';
  const port = await freePort(host);
  const daemon = await startDaemon(t, {
    command: mariadbd,
    args: [
      '--no-defaults',
      `--datadir=${data}`,
      `--socket=${join(dir, 'mariadb.sock')}`,
      `--pid-file=${join(dir, 'mariadb.pid')}`,
      `--port=${port}`,
      `--bind-address=${host}`,
      '--skip-grant-tables',
      '--skip-name-resolve',
      '--skip-log-bin',
      '--innodb-buffer-pool-size=16M',
      ...asUser,
    ],
    host,
    port,
    cwd: dir,
    readyTimeoutMs: 30_000,
  });
  return { host, port, user: 'root', output: daemon.output };
}
