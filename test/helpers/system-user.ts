import { execFileSync } from 'node:child_process';
import { userInfo } from 'node:os';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
}

/** uid/gid of a local account (`id`), or undefined when it does not exist. */
export function systemUser(name: string): SystemUser | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { name, uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

export function isRoot(): boolean {
  return userInfo().uid === 0;
}

/**
 * Adds a system account with no home and no login shell (useradd --system), for a machine test
 * (CI only) that needs a non-root user; returns it. Remove it with removeSystemUser.
 */
export function addSystemUser(name: string): SystemUser {
  execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name], { stdio: ['ignore', 'ignore', 'pipe'] });
  const user = systemUser(name);
  if (!user) throw new Error(`useradd ${name} made no account`);
  return user;
}

/** Removes an account addSystemUser made (nothing when it is not there). */
export function removeSystemUser(name: string): void {
  if (systemUser(name)) execFileSync('userdel', [name], { stdio: ['ignore', 'ignore', 'pipe'] });
}
