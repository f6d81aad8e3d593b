import { readFileSync } from 'node:fs';
import { link, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { ErrorCodes, GateError } from '../errors.js';

/** A held lock; `release()` removes the file if it is still ours. */
export interface UpgradeLock {
  path: string;
  release(): Promise<void>;
}

interface Holder {
  pid: number;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22), when known. */
  start: string | undefined;
}

/** A process's start time from /proc (Linux), undefined elsewhere or when it is gone. */
function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function parseHolder(text: string): Holder | undefined {
  const m = /^(\d+) (\S+)\n?$/.exec(text);
  if (!m) return undefined;
  return { pid: Number(m[1]), start: m[2] === '-' ? undefined : m[2] };
}

/**
 * Whether the process that wrote a lock still runs: signal 0 probes it (EPERM: it exists, under
 * another user), and where /proc tells start times, a process with the same pid but another start
 * time is a newcomer that reused the pid, not the holder.
 */
function isAlive(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (holder.start === undefined) return true;
  const now = startTime(holder.pid);
  return now === undefined || now === holder.start;
}

async function readHolder(path: string): Promise<{ text: string; holder: Holder | undefined } | undefined> {
  try {
    const text = await readFile(path, 'utf8');
    return { text, holder: parseHolder(text) };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function locked(path: string, why: string): GateError {
  return new GateError(ErrorCodes.UPGRADE_LOCKED, `${path}: ${why}`);
}

/**
 * Takes the updater's lock so two runs never overlap; a second run fails at once with
 * GATE_ERR_UPGRADE_LOCKED naming the holder's pid (systemd's timer never starts a second instance
 * of its unit, so a clash is a person running it by hand, who is told).
 *
 * The file holds `<pid> <start time>` and appears complete: it is written under a temporary name
 * and link(2)ed into place, which fails with EEXIST when a lock is there (O_EXCL semantics without
 * a window in which the file is empty). A lock whose process is gone (no such pid, or the pid now
 * belongs to a process that started later) is stale and taken over: under a second lock,
 * `<path>.takeover`, taken the same way so only one run can do it, the file is read again and,
 * still the same stale text, replaced with ours by rename(2). A takeover lock left by a run that
 * died in those few instructions is itself removed when its process is gone, and that run reports
 * the lock busy; the next run proceeds.
 */
export async function acquireLock(path: string): Promise<UpgradeLock> {
  try {
    return await takeLock(path);
  } catch (err) {
    if (err instanceof GateError) throw err;
    throw locked(path, `cannot take the lock: ${(err as Error).message}`);
  }
}

async function takeLock(path: string): Promise<UpgradeLock> {
  const mine = `${process.pid} ${startTime(process.pid) ?? '-'}\n`;
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, mine, { mode: 0o644 });
  const lock: UpgradeLock = {
    path,
    release: async () => {
      const now = await readHolder(path).catch(() => undefined);
      if (now?.text === mine) await unlink(path).catch(() => undefined);
    },
  };
  try {
    try {
      await link(temp, path);
      return lock;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const seen = await readHolder(path);
    if (seen === undefined) throw locked(path, 'released by another run while we looked; try again');
    if (seen.holder && isAlive(seen.holder)) throw locked(path, `another gate-upgrade run (pid ${seen.holder.pid}) holds the lock`);

    const guard = `${path}.takeover`;
    try {
      await link(temp, guard);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const other = await readHolder(guard);
      if (other?.holder && !isAlive(other.holder)) await unlink(guard).catch(() => undefined);
      throw locked(path, 'another run is taking over a stale lock');
    }
    try {
      const again = await readHolder(path);
      if (again !== undefined && again.text !== seen.text) throw locked(path, 'another run took the stale lock over first');
      await rename(temp, path);
      return lock;
    } finally {
      await unlink(guard).catch(() => undefined);
    }
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}
