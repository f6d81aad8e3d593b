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
