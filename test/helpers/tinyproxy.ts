import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requirePeer } from './peers.js';
import { freePort, startDaemon, type Teardownable } from './daemon.js';

export interface RunningProxy {
  host: string;
  port: number;
  /** Proxy URL without credentials, e.g. `http://127.0.0.2:41234`. */
  url: string;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * tinyproxy (Debian `tinyproxy`) in the foreground (-d) on 127.0.0.2 and a free port, with an
 * optional `BasicAuth user pass` (tinyproxy's config grammar only takes [A-Za-z0-9._-] there).
 * No ConnectPort line, so CONNECT is allowed to any port. Undefined when the peer is missing
 * (the test is then skipped, or failed in CI, by requirePeer).
 */
export async function startTinyproxy(
  t: PeerTest,
  options: { basicAuth?: { user: string; pass: string } } = {},
): Promise<RunningProxy | undefined> {
  const binary = requirePeer(t, 'tinyproxy', 'tinyproxy');
  if (!binary) return undefined;
  const host = '127.0.0.2';
  const port = await freePort(host);
  const dir = await mkdtemp(join(tmpdir(), 'gate-tinyproxy-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const conf = join(dir, 'tinyproxy.conf');
  await writeFile(
    conf,
    [
      `Port ${port}`,
      `Listen ${host}`,
      'Timeout 30',
      'Allow 127.0.0.0/8',
      'LogLevel Info',
      'MaxClients 50',
      ...(options.basicAuth ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.pass}`] : []),
      '',
    ].join('\n'),
  );
  const daemon = await startDaemon(t, { command: binary, args: ['-d', '-c', conf], host, port });
  return { host, port, url: `http://${host}:${port}`, output: daemon.output };
}
