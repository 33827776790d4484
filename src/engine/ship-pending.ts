// The `.svc/ship-pending/<run>` markers: the runs of a project whose worker could not ship them at their end, left to
// the recovery (ship-recovery.ts). Kept apart from it so the worker's live loop (shipper.ts), which marks and clears a
// run, and the recovery, which ships with that shipper, import no circle.
import { rmSync } from 'node:fs';
import { basename } from 'node:path';
import { makePlainPath, withDir, writeNoFollowIn } from './safe-fs.ts';
import { isValidSegment } from './ids.ts';
import { keptLocal, openPlainPath, pathIn, plainEntries } from './plain-tree.ts';
import { orNull, realOrNull } from '../spawn/tree.ts';
import { projectOf } from './paths.ts';

/** Marks the run for the next svc command to ship; not a run kept local, which only a named `svc ship` sends. */
export function markPending(dir: string): void {
  if (keptLocal(dir)) return;
  // A project svc cannot write: `svc ship` remains the way.
  orNull(() => withDir(makePlainPath(projectOf(dir), ['.svc', 'ship-pending'], 0o777),
    (pending) => writeNoFollowIn(pending, basename(dir), '')));
}

/** Takes the run's marker away: it shipped, or was refused on its own (shipRuns). */
export function clearPending(dir: string): void {
  // Inside .svc/ship-pending held open: a link the repository commits there is not followed to remove a file.
  const project = projectOf(dir);
  const pending = openPlainPath(realOrNull(project) ?? project, ['.svc', 'ship-pending']);
  if ('failed' in pending) return;
  withDir(pending, () => rmSync(pathIn(pending, basename(dir)), { force: true }));
}

/** Runs waiting to be shipped in `repo`, oldest name first. */
export function pendingRuns(repo: string): string[] {
  return plainEntries(repo, ['.svc', 'ship-pending'], 'file').filter(isValidSegment);
}
