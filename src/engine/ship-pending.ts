// The one recovery for runs the Control Plane has not heard the end of: a run whose final shipping failed (no Control
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

/** A run's entry the shipper left out (a link, a FIFO), and why. */
export type RunSkipReport = (run: string, entry: string, reason: string) => void;

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
 * The one way a finished run reaches the Control Plane after its worker's own shipping: the marked runs before the next
 * svc command, or `svc ship`'s. Each goes through the run's shipper while `budgetMs` lasts; one shipped whole loses its
 * marker. Stops at the first failure (the Control Plane may simply still be down): the caller says what is left.
 */
export async function shipRuns(
  repo: string, runs: string[], env: NodeJS.ProcessEnv, opts: { budgetMs?: number; onSkip?: RunSkipReport } = {},
): Promise<{ shipped: string[]; left: string[]; url: string | null; failure: string | null }> {
  const shipped: string[] = [];
  let url: string | null = null;
  let failure: string | null = null;
  const deadline = performance.now() + (opts.budgetMs ?? Infinity);
  for (const run of runs) {
    if (performance.now() > deadline) break;
    const dir = runDir(repo, run);
    const shipper = createShipper(dir, env, undefined, opts.onSkip && ((entry, why) => opts.onSkip!(run, entry, why)));
    url = shipper.url;
    if (!(await shipper.flush())) {
      failure = shipper.failure();
      break;
    }
    clearPending(dir);
    shipped.push(run);
  }
  return { shipped, left: runs.filter((r) => !shipped.includes(r)), url, failure };
}
