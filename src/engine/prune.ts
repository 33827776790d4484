// What `svc prune` removes (docs/deploy.md). Must not: touch a run that has not ended or a branch svc did not make.
import { lstatSync, realpathSync, rmSync } from 'node:fs';
import { realOrNull } from '../spawn/tree.ts';
import { join } from 'node:path';
import { git, headAndBranch } from './git.ts';
import { worktreeDir } from './paths.ts';
import { localRuns, trackedNames, type RunState } from './run-state.ts';
import { isValidSegment } from './ids.ts';
import { openPlainPath, plainEntries, skipReason } from './plain-tree.ts';
import { UnsafePathError } from './safe-fs.ts';
import { TERMINAL } from '../run-json.ts';

export interface PruneTarget {
  kind: 'worktree' | 'branch' | 'checkout';
  /** The worktree's or checkout's path, or the branch's name; `where` its repository (or checkouts folder). */
  name: string;
  where: string;
  run: string | null;
  /** Why it goes, or why it stays. */
  reason: string;
}

export interface PrunePlan {
  remove: PruneTarget[];
  keep: PruneTarget[];
}

/** A run id as svc makes them (engine/ids.ts newRunId): only such `svc/<id>` branches without a run folder are ours. */
const GENERATED_RUN_ID = /^r[0-9a-z]{26}$/;

export function ago(ms: number): string {
  const days = Math.floor(ms / 86_400_000);
  if (days >= 1) return `${days}d ago`;
  const hours = Math.floor(ms / 3_600_000);
  return hours >= 1 ? `${hours}h ago` : `${Math.max(0, Math.floor(ms / 60_000))}m ago`;
}

/** When the run ended (or last changed), in unix ms; null when its state says neither. */
export function endedAt(state: RunState): number | null {
  for (const value of [state.ended_at, state.updated_at]) {
    const t = typeof value === 'string' ? Date.parse(value) : NaN;
    if (Number.isFinite(t)) return t;
  }
  return null;
}

/** Throws unless `<root>/<parts…>` is a plain folder at every level and its real path is exactly that, checked right
 * before a removal (a link planted on the way since the plan would point elsewhere). */
export function assertOwnFolder(root: string, parts: readonly string[], path: string): void {
  const real = realpathSync(root);
  const opened = openPlainPath(real, parts);
  if ('failed' in opened) {
    throw new UnsafePathError(`Refusing to remove ${path}: ${opened.failed} ${skipReason(opened.kind)}`);
  }
  opened.close();
  const resolved = realOrNull(path);
  if (resolved === null) throw new UnsafePathError(`Refusing to remove ${path}: it is gone`);
  if (resolved !== join(real, ...parts)) {
    throw new UnsafePathError(`Refusing to remove ${path}: it leads to ${resolved}, not into ${root}`);
  }
}

/** Local `svc/*` branches with their tip's committer time (unix ms). */
function svcBranches(repo: string): Map<string, number> {
  const out = git(repo, ['for-each-ref', '--format=%(refname:short) %(committerdate:unix)', 'refs/heads/svc/']);
  const refs = out.split('\n').map((line) => line.trim().split(' ')).filter(([name]) => name);
  return new Map(refs.map(([name, time]) => [name!, Number(time) * 1000]));
}

/** The plan for one repository (its main checkout's root): what goes, and what stays with the reason. */
export function planProjectPrune(repo: string, olderThanMs: number, now = Date.now()): PrunePlan {
  const plan: PrunePlan = { remove: [], keep: [] };
  const branches = svcBranches(repo);
  // git refuses to delete the branch the main checkout is on: it stays, and says why.
  const checkedOut = headAndBranch(repo).branch;
  // Only plain folders svc could have made: none when `.svc` or `.svc/worktrees` is a link, none git tracks. When git
  // cannot tell (UntrackableError), the plan fails: without its runs, their branches would look left behind.
  const trackedTrees = trackedNames(repo, '.svc/worktrees');
  const worktrees = new Set(plainEntries(repo, ['.svc', 'worktrees'])
    .filter((name) => isValidSegment(name) && !trackedTrees(name)));
  const add = (go: boolean, target: PruneTarget) => (go ? plan.remove : plan.keep).push(target);
  const known = new Set<string>();
  for (const { run, state } of localRuns(repo, { strict: true })) {
    known.add(run);
    const branch = `svc/${run}`;
    // Only what svc made for this run: its worktree and the branch it made there.
    const hasTree = worktrees.has(run);
    const hasBranch = state.worktree && state.branch === branch && branches.has(branch);
    if (!hasTree && !hasBranch) continue;
    const ended = TERMINAL.has(state.status);
    const at = endedAt(state);
    const old = at !== null && now - at >= olderThanMs;
    const when = at === null ? 'at an unknown time' : ago(now - at);
    const reason = ended ? `run ${state.status} ${when}` : `run is ${state.status}`;
    if (hasTree) add(ended && old, { kind: 'worktree', name: worktreeDir(repo, run), where: repo, run, reason });
    if (hasBranch && branch === checkedOut) {
      plan.keep.push({ kind: 'branch', name: branch, where: repo, run, reason: 'checked out in the project' });
    } else if (hasBranch) add(ended && old, { kind: 'branch', name: branch, where: repo, run, reason });
  }
  // Left behind by a run folder that is gone (deleted by hand): nothing can be running there.
  for (const run of worktrees) {
    if (known.has(run)) continue;
    const path = worktreeDir(repo, run);
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat?.isDirectory()) continue;
    const age = now - stat.mtimeMs;
    add(age >= olderThanMs, { kind: 'worktree', name: path, where: repo, run, reason: `no run folder, ${ago(age)}` });
  }
  for (const [branch, time] of branches) {
    const run = branch.slice('svc/'.length);
    if (known.has(run) || !GENERATED_RUN_ID.test(run) || branch === checkedOut) continue;
    const age = now - time;
    add(age >= olderThanMs, { kind: 'branch', name: branch, where: repo, run, reason: `no run folder, ${ago(age)}` });
  }
  return plan;
}

/** Carries out one removal of a project plan; worktrees before branches (git refuses a branch a worktree holds). */
export function removeProjectTarget(target: PruneTarget): void {
  if (target.kind === 'worktree') {
    if (!isValidSegment(target.run)) throw new UnsafePathError(`Refusing to remove ${target.name}: no run`);
    const parts = ['.svc', 'worktrees', target.run];
    assertOwnFolder(target.where, parts, target.name);
    try {
      git(target.where, ['worktree', 'remove', '--force', '--force', target.name]);
    } catch {
      // Not a worktree git knows: a plain folder of ours, checked again as rmSync follows a link on the way to it
      // (never one inside it).
      assertOwnFolder(target.where, parts, target.name);
      rmSync(join(realpathSync(target.where), ...parts), { recursive: true, force: true });
    }
    git(target.where, ['worktree', 'prune']);
    return;
  }
  if (target.kind === 'branch') git(target.where, ['branch', '-D', target.name]);
}
