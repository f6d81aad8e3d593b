import { once } from 'node:events';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { requirePeer } from './peers.js';
import { tempDir } from './temp-dir.js';

export interface RunningRedis {
  host: string;
  port: number;
  output(): string;
  /** Stops the server (SIGKILL: as a crash, nothing flushed) and waits until it has exited. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty (no persistence), and waits until it accepts. */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: connected but silent, as a server stuck in a long command or a frozen host. */
  pause(): void;
  resume(): void;
}

export interface StartRedisOptions {
  /** `requirepass`: clients must AUTH with it. */
  password?: string;
  /** TLS only (`--port 0 --tls-port`), with this certificate, key and client CA (PEM files); clients send no certificate. */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * A throwaway Redis (Debian `redis-server`) in the foreground on 127.0.0.1 and a free port, no
 * persistence (`--save ''`, `--appendonly no`), its working dir a temp dir. Undefined when the
 * peer is missing.
 */
export async function startRedis(t: PeerTest, options: StartRedisOptions = {}): Promise<RunningRedis | undefined> {
  const binary = requirePeer(t, 'redis-server', 'redis-server');
  if (!binary) return undefined;
  const dir = await tempDir(t, 'redis');
  const host = '127.0.0.1';
  const port = await freePort(host);
  const args = [
    '--port',
    String(port),
    '--bind',
    host,
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
  ];
  if (options.password !== undefined) args.push('--requirepass', options.password);
  if (options.tls) {
    args.splice(0, 2, '--port', '0', '--tls-port', String(port));
    args.push(
      '--tls-cert-file',
      options.tls.certFile,
      '--tls-key-file',
      options.tls.keyFile,
      '--tls-ca-cert-file',
      options.tls.caFile,
      '--tls-auth-clients',
      'no',
    );
  }
  const start = () => startDaemon(t, { command: binary, args, host, port, cwd: dir });
  let daemon = await start();
  let earlier = '';
  return {
    host,
    port,
    output: () => earlier + daemon.output(),
    stop: async () => {
      const { child } = daemon;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
    pause: () => void daemon.child.kill('SIGSTOP'),
    resume: () => void daemon.child.kill('SIGCONT'),
    restart: async () => {
      earlier += daemon.output();
      daemon = await start();
    },
  };
}
