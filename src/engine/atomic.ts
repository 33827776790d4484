// Atomic file writes (temp file + rename) so a reader never sees half a state.json or answer file.
import { writeFileSync, renameSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';

export function writeJsonAtomic(path: string, value: unknown, mode = 0o644): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  // 'wx' (O_EXCL) refuses an existing name, symbolic links included, so the temp file is always our own new file.
  writeFileSync(tmp, JSON.stringify(value, null, 2) + '\n', { mode, flag: 'wx' });
  renameSync(tmp, path);
}
