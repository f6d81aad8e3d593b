import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { findBinary, requirePeer } from './peers.js';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import type { RunningProxy } from './tinyproxy.js';

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

export interface RunningSocksProxy extends RunningProxy {
  /** The throwaway system account dante authenticates (when `auth` was asked for). */
  user: { name: string; password: string } | undefined;
}

/**
 * danted (Debian `dante-server`) in the foreground on 127.0.0.2 and a free port. Dante's
 * `socksmethod: username` checks RFC 1929 credentials against the system's passwd/shadow, so
 * with `auth` this creates a throwaway account (`useradd -M -s /usr/sbin/nologin`, password set
 * with chpasswd; `password` may hold any character) and removes it in teardown. That needs
 * root: without it the test is skipped with a message. Connections to 127.0.0.3 are blocked by
 * rule (reply 2, "not allowed by ruleset").
 */
export async function startDante(t: PeerTest, options: { auth?: { password: string } } = {}): Promise<RunningSocksProxy | undefined> {
  const binary = requirePeer(t, 'danted', 'dante-server');
  if (!binary) return undefined;
  let user: RunningSocksProxy['user'];
  if (options.auth) {
    const useradd = findBinary('useradd');
    const chpasswd = findBinary('chpasswd');
    const userdel = findBinary('userdel');
    if (userInfo().uid !== 0 || !useradd || !chpasswd || !userdel) {
      const problem = 'dante username auth needs root to create a throwaway system user';
      // CI runs as root (.ci/run installs packages): there a missing capability is a failure.
      if (process.env.CI) t.fail(problem);
      else t.skip(problem, () => {});
      return undefined;
    }
    const name = `gmx${randomBytes(4).toString('hex')}`;
    execFileSync(useradd, ['-M', '-s', '/usr/sbin/nologin', name]);
    t.teardown(() => {
      try {
        execFileSync(userdel, [name]);
      } catch {
        // already gone
      }
    });
    execFileSync(chpasswd, [], { input: `${name}:${options.auth.password}\n` });
    user = { name, password: options.auth.password };
  }
  const host = '127.0.0.2';
  const port = await freePort(host);
  const dir = await mkdtemp(join(tmpdir(), 'gate-dante-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const conf = join(dir, 'danted.conf');
  await writeFile(
    conf,
    [
      'logoutput: stderr',
      `internal: ${host} port = ${port}`,
      `external: ${host}`,
      `socksmethod: ${user ? 'username' : 'none'}`,
      'clientmethod: none',
      ...(userInfo().uid === 0 ? ['user.privileged: root', 'user.unprivileged: nobody'] : []),
      'client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }',
      // 127.0.0.3 is off limits, so tests can see a SOCKS5 "not allowed by ruleset" reply.
      'socks block { from: 0.0.0.0/0 to: 127.0.0.3/32 }',
      'socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }',
      '',
    ].join('\n'),
  );
  const daemon = await startDaemon(t, { command: binary, args: ['-f', conf, '-p', join(dir, 'danted.pid')], host, port });
  return { host, port, url: `socks5://${host}:${port}`, output: daemon.output, user };
}
