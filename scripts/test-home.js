// Loaded by scripts/test.js into each test file's process (node --test --import): a HOME and a TMPDIR of that file's
// own inside the suite's, so whatever a test leaves in the HOME it inherited (a svc or a browser it started without a
// HOME of the test's) or in the temp dir (a folder it or its children made and never removed) names the file; and a
// watch on the file's process once its last test ended.
import { createHash } from 'node:crypto';
import { chmodSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after } from 'node:test';

/**
 * How long a test file's process may go on after its last test (and hook) ended. A server, child or timer a test
 * never closed keeps the process alive, and node --test waits for it forever: one forgotten handle used to hold the
 * whole suite until CI's own limit killed it, naming nothing. Past this the file fails instead, naming what holds
 * it. Closing what a file started takes well under a second; the margin is for a loaded machine.
 */
const HELD_MS = Number(process.env.SVC_TEST_HELD_MS) || 60_000;

/**
 * Fails this file's process if it is still running `HELD_MS` after its tests: unref'd, it never holds it itself.
 * The clock starts after the file's own top-level `after` hooks (closing its servers may take long on a loaded
 * machine): a root hook runs in the order registered, this one, registered at import, before the file's, so it
 * registers the one that starts the clock last of all.
 */
function watchForHeldProcess(name) {
  after((t) => t.after(() => {
    setTimeout(() => {
      const holders = [...new Set(process.getActiveResourcesInfo())].join(', ');
      process.stderr.write(`✖ ${name}: still running ${HELD_MS / 1000} s after its last test, held by: ${holders}\n`);
      process.exit(1);
    }, HELD_MS).unref();
  }));
}

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
  watchForHeldProcess(name);
}
