import t from 'tap';
import { spawnSync } from 'node:child_process';
import { access, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes } from '../../lib/errors.js';
import { acquireLock } from '../../lib/updater/lock.js';
import { tempDir } from '../helpers/temp-dir.js';

/** This process's start time as the lock records it. */
async function ownStart(): Promise<string> {
  const stat = await readFile(`/proc/${process.pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
}

t.test('one holder at a time; release frees it; the file names the holder', async (t) => {
  const dir = await tempDir(t, 'lock');
  const path = join(dir, 'lock');
  const lock = await acquireLock(path);
  t.equal(await readFile(path, 'utf8'), `${process.pid} ${await ownStart()}\n`);
  await t.rejects(acquireLock(path), { code: ErrorCodes.UPGRADE_LOCKED, message: new RegExp(`pid ${process.pid}\\) holds the lock`) });
  await lock.release();
  await t.rejects(access(path), 'released: gone');
  const again = await acquireLock(path);
  await again.release();
  t.same(await readdir(dir), [], 'no temporary files left');
});

t.test('a stale lock is taken over: dead pid, a pid reused by a later process, garbage', async (t) => {
  const dir = await tempDir(t, 'lock');
  const path = join(dir, 'lock');
  // A pid that has certainly exited: a child we ran to completion.
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  for (const [name, text] of [
    ['dead pid', `${dead} 12345\n`],
    ['pid alive but started at another time', `${process.pid} 1\n`],
    ['not a lock we wrote', 'garbage'],
  ] as const) {
    await writeFile(path, text);
    const lock = await acquireLock(path);
    t.equal((await readFile(path, 'utf8')).split(' ')[0], String(process.pid), `${name}: taken over`);
    await t.rejects(access(`${path}.takeover`), `${name}: the takeover guard is gone`);
    await lock.release();
  }
});

t.test('a takeover in progress elsewhere makes this run report the lock busy', async (t) => {
  const dir = await tempDir(t, 'lock');
  const path = join(dir, 'lock');
  const dead = spawnSync(process.execPath, ['-e', '']).pid;
  await writeFile(path, `${dead} 1\n`);
  await writeFile(`${path}.takeover`, `${process.pid} ${await ownStart()}\n`);
  await t.rejects(acquireLock(path), { code: ErrorCodes.UPGRADE_LOCKED, message: /taking over a stale lock/ });
  t.equal(await readFile(path, 'utf8'), `${dead} 1\n`, 'the stale lock is left to the run taking it over');
  // A guard left by a run that died is removed; that run reports busy, the next one proceeds.
  await writeFile(`${path}.takeover`, `${dead} 1\n`);
  await t.rejects(acquireLock(path), { code: ErrorCodes.UPGRADE_LOCKED });
  const lock = await acquireLock(path);
  await lock.release();
});

t.test('a lock that cannot be made is a GateError', async (t) => {
  await t.rejects(acquireLock('/nonexistent-dir/gate-upgrade.lock'), { code: ErrorCodes.UPGRADE_LOCKED, message: /cannot take the lock/ });
});
