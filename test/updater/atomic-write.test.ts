import t from 'tap';
import { chown, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes } from '../../lib/errors.js';
import { writeFileAtomic } from '../../lib/updater/atomic-write.js';
import { tempDir } from '../helpers/temp-dir.js';

t.test('new file in a new directory, replaced atomically, unchanged left alone', async (t) => {
  const dir = await tempDir(t, 'atomic');
  const path = join(dir, 'gate-upgrade.d', 'schedule');
  t.same(await writeFileAtomic(path, 'one\n'), { changed: true });
  t.equal(await readFile(path, 'utf8'), 'one\n');
  t.equal((await stat(join(dir, 'gate-upgrade.d'))).mode & 0o777, 0o755);
  const first = await stat(path);
  t.same(await writeFileAtomic(path, 'one\n'), { changed: false });
  t.equal((await stat(path)).mtimeMs, first.mtimeMs, 'not touched');
  t.same(await writeFileAtomic(path, 'two\n'), { changed: true });
  t.not((await stat(path)).ino, first.ino, 'a new inode renamed over the old one');
  t.same(await readdir(join(dir, 'gate-upgrade.d')), ['schedule'], 'no temporary file left');
});

t.test('failures name the file and leave it as it was', async (t) => {
  const dir = await tempDir(t, 'atomic');
  const blocker = join(dir, 'not-a-dir');
  await writeFile(blocker, 'x');
  await t.rejects(writeFileAtomic(join(blocker, 'schedule'), 'y'), {
    code: ErrorCodes.UPGRADE_SCHEDULE_WRITE,
    message: /not-a-dir\/schedule: /,
  });
  // The target is a directory: rename(2) cannot replace it; the temporary file is cleaned up.
  const target = join(dir, 'schedule');
  await (await import('node:fs/promises')).mkdir(target);
  await t.rejects(writeFileAtomic(target, 'y'), { code: ErrorCodes.UPGRADE_SCHEDULE_WRITE });
  t.same((await readdir(dir)).sort(), ['not-a-dir', 'schedule'], 'no temporary file left');
});

t.test(
  "the existing owner is kept by default, and not with keepOwner: false (the agent's own ready.json)",
  { skip: process.getuid?.() === 0 ? false : 'needs root (to give a file to another user)' },
  async (t) => {
    const dir = await tempDir(t, 'gate-atomic-owner-');
    const kept = join(dir, 'schedule');
    const own = join(dir, 'ready.json');
    for (const path of [kept, own]) {
      await writeFile(path, 'old\n');
      await chown(path, 1, 1);
    }
    await writeFileAtomic(kept, 'new\n');
    await writeFileAtomic(own, 'new\n', { keepOwner: false });
    t.equal((await stat(kept)).uid, 1, 'a schedule handed to another user stays theirs');
    t.equal((await stat(own)).uid, process.getuid!(), 'the writer owns its own file after the write');
    t.equal(await readFile(own, 'utf8'), 'new\n');
  },
);
