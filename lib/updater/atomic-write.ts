import { randomBytes } from 'node:crypto';
import { chown, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ErrorCodes, GateError } from '../errors.js';

export interface AtomicWriteResult {
  /** False when the file already held exactly this text (nothing was touched). */
  changed: boolean;
  /** True when the file was rewritten in place (see `inPlaceWhenDirectoryDenies`). */
  inPlace?: boolean;
}

export interface AtomicWriteOptions {
  /**
   * When this user may write the file but not create one beside it (a non-root agent that owns
   * the schedule file in a root-owned directory), rewrite the file in place instead: write from
   * the start, cut to length, fsync. Readers must then recognise a torn file themselves (the
   * schedule carries a checksum for that); without this option that case is an error.
   */
  inPlaceWhenDirectoryDenies?: boolean;
  /**
   * Give the new file the existing one's owner and group (default true: the updater, as root,
   * keeps a schedule an operator handed to a non-root agent theirs). False for a file the writer
   * itself owns, such as the agent's ready.json: an agent that once ran as root and now runs as a
   * user (the enrollment procedure's step 5) could never chown a replacement back to root, and
   * its file would stay stale for good.
   */
  keepOwner?: boolean;
}

/** Rewrites an existing file's content where it is: same inode, owner and mode. */
async function rewriteInPlace(path: string, text: string): Promise<void> {
  const handle = await open(path, 'r+');
  try {
    const bytes = Buffer.from(text);
    // One write from offset 0, then cut: until truncate a reader may see the new bytes followed by
    // the old file's tail, which the checksum rejects.
    await handle.write(bytes, 0, bytes.length, 0);
    await handle.truncate(bytes.length);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `path` with `text` so that a reader sees the old file or the new one, never half of
 * either: the text goes to a temporary file in the same directory (rename(2) is atomic only within
 * one file system), is flushed with fsync, then renamed over `path`. An existing file's mode, owner
 * and group are given to the new one first, so a schedule an operator handed to a non-root agent
 * stays theirs; a new file is 0644 (the schedule is not secret), its directory made
 * (0755) when missing. Unchanged content is left alone. Errors: GATE_ERR_UPGRADE_SCHEDULE_WRITE.
 */
export async function writeFileAtomic(path: string, text: string, options: AtomicWriteOptions = {}): Promise<AtomicWriteResult> {
  const dir = dirname(path);
  const fail = (what: string, err: unknown): GateError =>
    new GateError(ErrorCodes.UPGRADE_SCHEDULE_WRITE, `${path}: ${what}: ${(err as Error).message}`, { cause: err });
  let existing: { mode: number; uid: number; gid: number } | undefined;
  try {
    const st = await stat(path);
    existing = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
    if ((await readFile(path, 'utf8')) === text) return { changed: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw fail('cannot read the existing file', err);
  }
  try {
    await mkdir(dir, { recursive: true, mode: 0o755 });
  } catch (err) {
    throw fail('cannot make its directory', err);
  }
  const temp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let handle;
  try {
    // O_EXCL: never write through a file (or symlink) someone else planted under the temp name.
    handle = await open(temp, 'wx', existing?.mode ?? 0o644);
  } catch (err) {
    const denied = (err as NodeJS.ErrnoException).code === 'EACCES' || (err as NodeJS.ErrnoException).code === 'EPERM';
    if (!(denied && existing && options.inPlaceWhenDirectoryDenies)) throw fail('cannot create a temporary file beside it', err);
    try {
      await rewriteInPlace(path, text);
    } catch (inPlaceErr) {
      throw fail('cannot create a temporary file beside it, nor rewrite it in place', inPlaceErr);
    }
    return { changed: true, inPlace: true };
  }
  try {
    await handle.writeFile(text);
    // open()'s mode went through the umask; chmod gives the exact mode back.
    await handle.chmod(existing?.mode ?? 0o644);
    const st = await handle.stat();
    const keepOwner = options.keepOwner ?? true;
    if (keepOwner && existing && (st.uid !== existing.uid || st.gid !== existing.gid)) await chown(temp, existing.uid, existing.gid);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await rename(temp, path);
  } catch (err) {
    await handle?.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw fail('cannot replace it', err);
  }
  return { changed: true };
}
