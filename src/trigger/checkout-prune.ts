// What `svc prune --checkouts` removes: the trigger's managed job checkouts of jobs that have ended, once older than a
// given age (docs/deploy.md: what stays, and why what git tracks under .svc/ is ignored). Must not: remove one whose
// job, run or shipping is not done; follow a link; touch the mirrors, which every later job fetches into.
import { existsSync, lstatSync, realpathSync, rmdirSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { openConnection, userVersion } from '../db/open.ts';
import { RefusedError } from '../errors.ts';
import { triggerMigrations } from '../db/trigger-migrations.ts';
import { createTriggerJobsStore, type TriggerJobsStore } from '../db/trigger-jobs-store.ts';
import { TERMINAL } from '../run-json.ts';
import { UnsafePathError } from '../engine/safe-fs.ts';
import { isValidSegment } from '../engine/ids.ts';
import { ago, assertOwnFolder, endedAt, type PrunePlan } from '../engine/prune.ts';
import { plainEntries } from '../engine/plain-tree.ts';
import { localRuns, trackedNames, UntrackableError, type Committed } from '../engine/run-state.ts';

/** The job queue, never migrated from here: a database at another schema version is refused. */
function openJobs(dbPath: string): Pick<TriggerJobsStore, 'get'> & { close(): void } {
  if (!existsSync(dbPath)) return { get: () => undefined, close: () => {} };
  const db = openConnection(dbPath);
  const version = userVersion(db);
  if (version !== triggerMigrations.length) {
    db.close();
    throw new RefusedError(`The trigger's job queue ${dbPath} is at schema version ${version}, this svc knows ` +
      `${triggerMigrations.length}: prune with the svc version of the trigger server that uses it`);
  }
  return { get: createTriggerJobsStore(db).get, close: () => db.close() };
}

/** Why the checkout must stay whatever its age, or null; and the newest time anything in it ended. */
function inUse(dir: string): { why: string | null; last: number | null } {
  let last: number | null = null;
  // Asked first: when git cannot tell what the checkout commits, localRuns finds none, so its runs would look ended.
  let tracked: Committed;
  try {
    tracked = trackedNames(dir, '.svc/ship-pending');
  } catch (err) {
    if (err instanceof UntrackableError) return { why: err.message, last };
    throw err;
  }
  for (const { run, state } of localRuns(dir)) {
    if (!TERMINAL.has(state.status)) return { why: `run ${run} is ${state.status}`, last };
    const at = endedAt(state);
    if (at !== null) last = Math.max(last ?? 0, at);
  }
  const pending = plainEntries(dir, ['.svc', 'ship-pending'], 'file').filter(isValidSegment);
  if (pending.some((run) => !tracked(run))) {
    return { why: 'its runs have not reached the Control Plane (run svc ship there first)', last };
  }
  return { why: null, last };
}

export function planCheckoutPrune(checkouts: string, dbPath: string, olderThanMs: number, now = Date.now()): PrunePlan {
  const plan: PrunePlan = { remove: [], keep: [] };
  const jobs = openJobs(dbPath);
  // The folder the operator named may itself be a link; below it, every level must be a plain folder.
  const root = existsSync(checkouts) ? realpathSync(checkouts) : checkouts;
  try {
    for (const owner of plainEntries(root, [])) {
      for (const name of plainEntries(root, [owner])) {
        for (const job of plainEntries(root, [owner, name]).filter(isValidSegment)) { // not the spare (.next)
          const dir = join(checkouts, owner, name, job);
          const row = jobs.get(job);
          const base = { kind: 'checkout' as const, name: dir, where: checkouts, run: null };
          if (row && (row.status === 'queued' || row.status === 'running')) {
            plan.keep.push({ ...base, reason: `job ${job} is ${row.status}` });
            continue;
          }
          const use = inUse(dir);
          if (use.why) {
            plan.keep.push({ ...base, reason: use.why });
            continue;
          }
          const at = row?.finished_at ?? use.last ?? lstatSync(dir).mtimeMs;
          // A folder's mtime can read a fraction of a millisecond after `now`: its age is then 0, never negative.
          const age = Math.max(0, now - at);
          const reason = `job ${row ? row.status : 'ended'} ${ago(age)}`;
          (age >= olderThanMs ? plan.remove : plan.keep).push({ ...base, reason });
        }
      }
    }
  } finally {
    jobs.close();
  }
  return plan;
}

/**
 * Removes one checkout, then its repository's and owner's folders when they are left empty; only once each level of
 * `<checkouts>/<owner>/<name>/<job>` is a plain folder and the checkout's real path is exactly that.
 */
export function removeCheckout(checkouts: string, dir: string): void {
  const parts = relative(checkouts, dir).split(sep);
  if (parts.length !== 3 || parts.some((part) => part === '..' || part === '')) {
    throw new UnsafePathError(`Refusing to remove ${dir}: not a checkout in ${checkouts}`);
  }
  assertOwnFolder(checkouts, parts, dir);
  const real = join(realpathSync(checkouts), ...parts);
  rmSync(real, { recursive: true, force: true });
  for (const parent of [join(real, '..'), join(real, '..', '..')]) {
    try {
      rmdirSync(parent);
    } catch {
      break; // not empty
    }
  }
}
