// Runs the Control Plane has not heard the end of: a run whose final shipping failed (no Control
// Plane reachable) leaves a marker, `.svc/ship-pending/<run>`, and the next svc command in the project that reaches a
// Control Plane sends it (`svc start`, `svc runs`, `svc dashboard`, and `svc ship` by hand). Markers are plain empty
// files, written and read without following a link.
import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { plainSubdir, writeNoFollow } from './safe-fs.ts';
import { isValidSegment } from './ids.ts';
import { runDir } from './paths.ts';
import { createShipper } from './shipper.ts';

function pendingDir(repo: string): string {
  return join(repo, '.svc', 'ship-pending');
}

/** The project of a run folder `<repo>/.svc/runs/<run>`. */
function projectOf(dir: string): string {
  return dirname(dirname(dirname(dir)));
}

export function markPending(dir: string): void {
  try {
    writeNoFollow(join(plainSubdir(projectOf(dir), join('.svc', 'ship-pending')), basename(dir)), '');
  } catch {
    // a project svc cannot write: `svc ship` remains the way
  }
}

export function clearPending(dir: string): void {
  rmSync(join(pendingDir(projectOf(dir)), basename(dir)), { force: true });
}

/** Runs waiting to be shipped in `repo`, oldest name first. */
export function pendingRuns(repo: string): string[] {
  const dir = pendingDir(repo);
  const stat = lstatSync(dir, { throwIfNoEntry: false });
  if (!stat?.isDirectory()) return [];
  return readdirSync(dir).filter(isValidSegment).sort();
}

/**
 * Sends the pending runs while `budgetMs` lasts; a run shipped whole loses its marker. Quiet on failure (the caller
 * says what is left): the Control Plane may simply still be down.
 */
export async function shipPending(
  repo: string, env: NodeJS.ProcessEnv, budgetMs = 3_000,
): Promise<{ shipped: string[]; left: string[]; url: string | null }> {
  const runs = pendingRuns(repo);
  const shipped: string[] = [];
  let url: string | null = null;
  const deadline = performance.now() + budgetMs;
  for (const run of runs) {
    if (performance.now() > deadline) break;
    const dir = runDir(repo, run);
    const shipper = createShipper(dir, env);
    url = shipper.url;
    if (!(await shipper.flush())) break;
    clearPending(dir);
    shipped.push(run);
  }
  return { shipped, left: runs.filter((r) => !shipped.includes(r)), url };
}
