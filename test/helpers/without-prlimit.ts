// A host without util-linux's prlimit, for one command: it runs in a private mount namespace where /dev/null covers
// every prlimit in the folders svc looks in (src/spawn/limits.ts PRLIMIT_DIRS), so svc, and every sandbox it starts,
// finds none. The host itself stays unchanged (other tests and people share it). Needs `unshare -m` (root here).
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { PRLIMIT_DIRS } from '../../src/spawn/limits.ts';

/** Each real prlimit in the folders svc looks in, once (a merged /usr shows one file under several names). */
const installed = [...new Set(PRLIMIT_DIRS.map((d) => join(d, 'prlimit')).filter((p) => existsSync(p))
  .map((p) => realpathSync(p)))];

const covers = installed.map((p) => `mount --bind /dev/null ${p}`).join(' && ');

/** The argv that runs `command` with no prlimit to be found (`sh -c` mounts the covers, then execs the command). */
export function withoutPrlimit(command: string[]): string[] {
  const cover = `${covers || 'true'} && exec "$@"`;
  return ['unshare', '-m', '--propagation', 'private', 'sh', '-c', cover, 'sh', ...command];
}

const NONE_FOUND = PRLIMIT_DIRS.map((d) => `! [ -f ${d}/prlimit ]`).join(' && ');

/** Why the tests that need this cannot run here, or false when they can. */
export const withoutPrlimitSkip: string | false = spawnSync('unshare',
  withoutPrlimit(['sh', '-c', NONE_FOUND]).slice(1)).status === 0 ? false : 'unshare -m is not permitted here';
