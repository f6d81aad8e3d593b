import type { ChildProcess } from 'node:child_process';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { requirePeer } from './peers.js';
import { tempDir } from './temp-dir.js';

export interface RunningRedis {
  host: string;
  port: number;
  output(): string;
  /** The redis-server process (a test that restarts Redis kills it and starts another on `port`). */
  child: ChildProcess;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * A throwaway Redis (Debian `redis-server`) in the foreground on 127.0.0.1 and a free port, no
 * persistence (`--save ''`, `--appendonly no`), its working dir a temp dir. Undefined when the
 * peer is missing. `port`: that port instead of a free one (a restart on the same address).
 */
export async function startRedis(t: PeerTest, options: { port?: number } = {}): Promise<RunningRedis | undefined> {
  const binary = requirePeer(t, 'redis-server', 'redis-server');
  if (!binary) return undefined;
  const dir = await tempDir(t, 'redis');
  const host = '127.0.0.1';
  const port = options.port ?? (await freePort(host));
  const daemon = await startDaemon(t, {
    command: binary,
    args: ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning'],
    host,
    port,
    cwd: dir,
  });
  return { host, port, output: daemon.output, child: daemon.child };
}
