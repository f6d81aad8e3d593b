import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { requirePeer } from './peers.js';
import { tempDir } from './temp-dir.js';

export interface RunningRedis {
  host: string;
  port: number;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * A throwaway Redis (Debian `redis-server`) in the foreground on 127.0.0.1 and a free port, no
 * persistence (`--save ''`, `--appendonly no`), its working dir a temp dir. Undefined when the
 * peer is missing.
 */
export async function startRedis(t: PeerTest): Promise<RunningRedis | undefined> {
  const binary = requirePeer(t, 'redis-server', 'redis-server');
  if (!binary) return undefined;
  const dir = await tempDir(t, 'redis');
  const host = '127.0.0.1';
  const port = await freePort(host);
  const daemon = await startDaemon(t, {
    command: binary,
    args: ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'warning'],
    host,
    port,
    cwd: dir,
  });
  return { host, port, output: daemon.output };
}
