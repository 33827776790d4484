// What a run without a worktree needs from its checkout before it starts: the checkout to itself (two runs writing
// one tree would each sign the other's work), and the tree it starts from, so its diff covers only its own changes.
import { RefusedError } from '../errors.ts';
import { TERMINAL } from '../run-json.ts';
import { snapshotTree, workingChanges } from './git.ts';
import { localRuns } from './local-runs.ts';
import { workerAlive } from './repo-name.ts';
import type { RunState } from './run-state.ts';

/** A run just made has no worker yet; one still without a worker after this never got one. */
const UNSTARTED_GRACE_MS = 60_000;

function holdsCheckout(state: RunState, now: number): boolean {
  if (state.worktree !== false || TERMINAL.has(state.status)) return false;
  if (state.pid === null) return now - Date.parse(state.started_at) < UNSTARTED_GRACE_MS;
  return workerAlive(state);
}

/** Refuses a run without a worktree while another such run is working in the same checkout. */
export function assertCheckoutFree(repo: string): void {
  const now = Date.now();
  const busy = localRuns(repo).find((found) => found.state.repo_path === repo && holdsCheckout(found.state, now));
  if (!busy) return;
  throw new RefusedError(`Run ${busy.run} is already working in this checkout without a worktree; start this run ` +
    `with --worktree (its own checkout), or wait for it to end (svc runs stop ${busy.run} ends it now)`);
}

/**
 * The checkout's starting tree (null when it is HEAD's: the run then diffs against its base commit), and a note for
 * the run log when it held changes not in HEAD (else null). A clean checkout costs one `git status`.
 */
export function startingTree(repo: string): { tree: string | null; dirty: string | null } {
  const { changed, embedded } = workingChanges(repo);
  if (changed.length === 0) return { tree: null, dirty: null };
  const dirty = `the checkout had ${changed.length} uncommitted or untracked file(s) at the start ` +
    `(e.g. ${changed[0]}); the diff and receipt cover only what changed after`;
  return { tree: snapshotTree(repo, embedded), dirty };
}
