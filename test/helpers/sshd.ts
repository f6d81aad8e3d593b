import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, startDaemon, type Teardownable } from './daemon.js';
import { findBinary, requirePeer } from './peers.js';
import { isRoot, systemUser } from './system-user.js';
import { tempDir } from './temp-dir.js';

const execFileAsync = promisify(execFile);

/** The name the client checks the host key under, whatever port or proxy it dials. */
export const SSHD_HOST_KEY_ALIAS = 'gate-interop-sshd';

export interface RunningSshd {
  host: string;
  port: number;
  /** The account the client logs in as (the test's own user). */
  user: string;
  /** Private key the server accepts (AuthorizedKeysFile holds its public half). */
  clientKey: string;
  /** known_hosts with the server's host key under SSHD_HOST_KEY_ALIAS. */
  knownHosts: string;
  output(): string;
}

type PeerTest = Teardownable & Parameters<typeof requirePeer>[0];

/**
 * OpenSSH's privilege separation needs the `sshd` account and the empty /run/sshd directory,
 * which the Debian package's postinst and systemd unit create. On a machine where the package
 * was unpacked but never configured (or the service never started) a root test creates them the
 * same way, once, and leaves them: they are the package's own state, and another test file may
 * be using them at the same moment.
 */
async function privilegeSeparationReady(): Promise<string | undefined> {
  if (!systemUser('sshd')) {
    if (!isRoot()) return 'the sshd privilege separation account is missing (dpkg --configure openssh-server)';
    const useradd = findBinary('useradd');
    if (!useradd) return 'the sshd account is missing and useradd is not installed';
    try {
      await execFileAsync(useradd, ['--system', '--no-create-home', '--home-dir', '/run/sshd', '--shell', '/usr/sbin/nologin', 'sshd']);
    } catch (err) {
      // Exit 9: another test file created it first.
      if (!systemUser('sshd')) return `cannot create the sshd account: ${(err as Error).message}`;
    }
  }
  try {
    await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  } catch (err) {
    return `cannot create /run/sshd: ${(err as Error).message}`;
  }
  return undefined;
}

/**
 * A real OpenSSH server (Debian `openssh-server`), `sshd -D -e` on 127.0.0.1 and a free port with
 * its own config, a fresh ed25519 host key and one authorized client key, all in a temp dir; no
 * PAM, no passwords. The client logs in as the test's own user. Undefined when the peer is missing.
 */
export async function startSshd(t: PeerTest): Promise<RunningSshd | undefined> {
  const sshd = requirePeer(t, 'sshd', 'openssh-server');
  const keygen = requirePeer(t, 'ssh-keygen', 'openssh-client');
  if (!sshd || !keygen) return undefined;
  const problem = await privilegeSeparationReady();
  if (problem) {
    if (process.env.CI) t.fail(problem);
    else t.skip(problem, () => {});
    return undefined;
  }
  const dir = await tempDir(t, 'sshd');
  const hostKey = join(dir, 'host_ed25519');
  const clientKey = join(dir, 'client_ed25519');
  await execFileAsync(keygen, ['-q', '-t', 'ed25519', '-N', '', '-C', 'gate-interop-host', '-f', hostKey]);
  await execFileAsync(keygen, ['-q', '-t', 'ed25519', '-N', '', '-C', 'gate-interop-client', '-f', clientKey]);
  const authorizedKeys = join(dir, 'authorized_keys');
  await writeFile(authorizedKeys, await readFile(`${clientKey}.pub`));
  const knownHosts = join(dir, 'known_hosts');
  await writeFile(knownHosts, `${SSHD_HOST_KEY_ALIAS} ${(await readFile(`${hostKey}.pub`, 'utf8')).trim()}\n`);
  const host = '127.0.0.1';
  const port = await freePort(host);
  const config = join(dir, 'sshd_config');
  await writeFile(
    config,
    [
      `Port ${port}`,
      `ListenAddress ${host}`,
      `HostKey ${hostKey}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${authorizedKeys}`,
      // The temp dir is not owned the way StrictModes wants (and may be world-readable /tmp).
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication yes',
      'PermitRootLogin prohibit-password',
      `AllowUsers ${userInfo().username}`,
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  );
  // sshd re-executes itself, so it needs its absolute path (findBinary gives one).
  const daemon = await startDaemon(t, { command: sshd, args: ['-D', '-e', '-f', config], host, port });
  return { host, port, user: userInfo().username, clientKey, knownHosts, output: daemon.output };
}

/**
 * ssh client options that read no user or system config, never prompt, and accept only the test
 * server's host key (checked under SSHD_HOST_KEY_ALIAS whatever port or proxy is dialled).
 */
export function sshClientArgs(server: RunningSshd, options: { port: number; host?: string; extra?: string[] }): string[] {
  return [
    '-F',
    'none',
    '-o',
    'BatchMode=yes',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    `UserKnownHostsFile=${server.knownHosts}`,
    '-o',
    `HostKeyAlias=${SSHD_HOST_KEY_ALIAS}`,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'ConnectTimeout=15',
    '-o',
    'LogLevel=ERROR',
    '-i',
    server.clientKey,
    '-p',
    String(options.port),
    ...(options.extra ?? []),
    `${server.user}@${options.host ?? '127.0.0.1'}`,
  ];
}
