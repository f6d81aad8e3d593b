import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemon, type Daemon, type Teardownable } from './daemon.js';

/**
 * A real HAProxy in the foreground (`-db`) in TCP mode with `sections` (its `listen` blocks)
 * after a common preamble; ready once it accepts on `ready` (startDaemon's probe is a bare
 * connection, which HAProxy may relay to a backend as a header-only connection). Stopped in
 * teardown. The caller checks the binary with requirePeer first.
 */
export async function startHaproxy(
  t: Teardownable,
  binary: string,
  sections: string[],
  ready: { host: string; port: number },
): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), 'gate-haproxy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, 'haproxy.cfg');
  const preamble = [
    'global',
    '  log stderr format raw local0 err',
    'defaults',
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 10s',
    '  timeout server 10s',
  ];
  writeFileSync(config, [...preamble, ...sections, ''].join('\n'));
  return startDaemon(t, { command: binary, args: ['-db', '-f', config], host: ready.host, port: ready.port });
}
