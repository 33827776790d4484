// The unprivileged pass of the hostile-agent suites runs svc as `nobody`, which must reach this checkout's CLI and the
// pinned Node inside it. A checkout cloned into a private folder (`mktemp -d` makes 0700) would stop it at the first
// folder it may not pass, so each folder above the checkout that lacks the "others may pass" bit gets it: pass only,
// not read (nothing in them can be listed). The bit is left set: two suites run at once in separate processes, and
// one restoring a mode would cut off the other mid-run.
import { chmodSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Makes every folder from `/` down to `path`'s folder passable by others. */
export function letNobodyReach(path: string): void {
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    const mode = statSync(dir).mode & 0o7777;
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
    if (dir === dirname(dir)) break;
  }
}
