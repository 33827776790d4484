// A pid a test's stand-in wrote to a file, and the one way tests kill that stand-in's process group. Never group 0:
// kill(-0) signals every process in the caller's own group (the test runner, npm and CI's shell with it).
import { readFileSync } from 'node:fs';

/** The pid in `path`, or null while the file is missing, empty or half-written (waitFor it). */
export function pidIn(path: string): number | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
  const pid = /^\d{1,10}$/.test(text) ? Number(text) : 0;
  return pid > 1 ? pid : null;
}

/** SIGKILLs process group `pid` (a stand-in started as a group leader); a group already gone is no error. */
export function killGroup(pid: number): void {
  if (!Number.isSafeInteger(pid) || pid <= 1) throw new RangeError(`Refusing to signal process group ${pid}`);
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
