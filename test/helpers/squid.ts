import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { requirePeer } from './peers.js';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import type { RunningProxy } from './tinyproxy.js';

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

const NCSA_HELPER = '/usr/lib/squid/basic_ncsa_auth';

/** uid/gid of Debian's `proxy` user, which squid switches to when started as root. */
function proxyUserIds(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', 'proxy']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'proxy']).toString().trim());
    return { uid, gid };
  } catch {
    return undefined;
  }
}

/**
 * squid (Debian `squid`) in the foreground (-N) on 127.0.0.2 and a free port: no cache_dir, no
 * pinger, pid and logs in a temp dir, CONNECT allowed to every port (`acl SSL_ports port
 * 1-65535`, no `deny CONNECT !SSL_ports`). With `users`, Basic auth through basic_ncsa_auth
 * and an APR1 password file made with `openssl passwd -apr1`, so passwords may hold any
 * character (tinyproxy's cannot).
 */
export async function startSquid(t: PeerTest, options: { users?: Record<string, string> } = {}): Promise<RunningProxy | undefined> {
  const binary = requirePeer(t, 'squid', 'squid');
  if (!binary) return undefined;
  const host = '127.0.0.2';
  const port = await freePort(host);
  const dir = await mkdtemp(join(tmpdir(), 'gate-squid-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const lines = [
    `http_port ${host}:${port}`,
    'pinger_enable off',
    'acl SSL_ports port 1-65535',
    'acl CONNECT method CONNECT',
    `pid_filename ${join(dir, 'squid.pid')}`,
    `cache_log ${join(dir, 'cache.log')}`,
    `access_log ${join(dir, 'access.log')}`,
    'cache_store_log none',
    'cache deny all',
    `coredump_dir ${dir}`,
    'shutdown_lifetime 0 seconds',
  ];
  if (options.users) {
    const passwd = join(dir, 'passwd');
    const entries = Object.entries(options.users).map(
      ([user, pass]) => `${user}:${execFileSync('openssl', ['passwd', '-apr1', '-stdin'], { input: pass }).toString().trim()}`,
    );
    await writeFile(passwd, `${entries.join('\n')}\n`);
    lines.push(
      `auth_param basic program ${NCSA_HELPER} ${passwd}`,
      'auth_param basic children 1 startup=1',
      'acl authed proxy_auth REQUIRED',
      'http_access allow authed',
      'http_access deny all',
    );
  } else {
    lines.push('http_access allow all');
  }
  await writeFile(join(dir, 'squid.conf'), `${lines.join('\n')}\n`);
  // Started as root, squid runs as `proxy`, which must be able to write its logs and pid.
  const ids = userInfo().uid === 0 ? proxyUserIds() : undefined;
  if (ids) {
    await chown(dir, ids.uid, ids.gid);
    for (const f of ['squid.conf', 'passwd']) await chown(join(dir, f), ids.uid, ids.gid).catch(() => undefined);
  }
  const daemon = await startDaemon(t, {
    command: binary,
    args: ['-N', '-f', join(dir, 'squid.conf')],
    host,
    port,
    // shutdown_lifetime 0 still lingers ~1.5 s on SIGTERM; its helpers exit on stdin EOF anyway.
    killAfterMs: 300,
  });
  return { host, port, url: `http://${host}:${port}`, output: daemon.output };
}
