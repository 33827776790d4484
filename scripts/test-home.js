// Loaded by scripts/test.js into each test file's process (node --test --import): a HOME and a TMPDIR of that file's
// own inside the suite's, so whatever a test leaves in the HOME it inherited (a svc or a browser it started without a
// HOME of the test's) or in the temp dir (a folder it or its children made and never removed) names the file.
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * A test file's TMPDIR folder: a short digest of its path, not the path itself, so a socket made in a temp folder
 * under it (Chromium's SingletonSocket, a gate's) still fits Linux's 107-byte limit. The runner maps it back.
 */
export const tempNameOf = (file) => createHash('sha256').update(file).digest('hex').slice(0, 10);

const file = process.argv[1];
if (file?.endsWith('.test.ts')) {
  const name = relative(process.cwd(), file);
  if (process.env.HOME) {
    process.env.HOME = join(process.env.HOME, name.replaceAll('/', '+'));
    mkdirSync(process.env.HOME);
  }
  if (process.env.TMPDIR) {
    process.env.TMPDIR = join(process.env.TMPDIR, tempNameOf(name));
    mkdirSync(process.env.TMPDIR);
    chmodSync(process.env.TMPDIR, 0o1777); // as /tmp: tests run svc as nobody on what they make here
  }
}
