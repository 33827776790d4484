// Replaces a file whole: a reader sees the old text or the new, never half, and nothing is written through a link.
import { randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, fchownSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes `data` to a new temporary name beside `path`, then renames it over `path`, with exactly `mode` (the umask
 * does not narrow it, unless `umask`). The folder may be another user's, who could plant a link at a name it can
 * guess, or swap a hard link in once the file is closed: the temporary name is made with 'wx' (O_EXCL: never through a
 * link), and its mode and `owner` are set through the descriptor (the file we made, whatever the name then points to).
 */
export function writeFileAtomic(
  path: string, data: string | Buffer, mode: number, o: { owner?: { uid: number; gid: number }; umask?: boolean } = {},
): void {
  // A random part too: a temporary file a crash left under a pid used again must not make every later write fail.
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(temp, 'wx', mode);
  try {
    try {
      // The open made it with `mode` less the umask.
      if (!o.umask) fchmodSync(fd, mode);
      // Only root can give a file away.
      if (o.owner && process.getuid?.() === 0) fchownSync(fd, o.owner.uid, o.owner.gid);
      writeFileSync(fd, data);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (err) {
    // Not left behind for each failed write to add another.
    rmSync(temp, { force: true });
    throw err;
  }
}
