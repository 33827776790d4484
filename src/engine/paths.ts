// Where a run lives on disk (DESIGN §3 "On disk"): one function per path so no caller builds them by hand.
import { dirname, join, resolve, sep } from 'node:path';

export function runsDir(repo: string): string {
  return join(repo, '.svc', 'runs');
}
export function runDir(repo: string, run: string): string {
  return join(repo, '.svc', 'runs', run);
}
/** The project a run folder is in: runDir's inverse. */
export function projectOf(runFolder: string): string {
  return dirname(dirname(dirname(runFolder)));
}
export function worktreeDir(repo: string, run: string): string {
  return join(repo, '.svc', 'worktrees', run);
}
/**
 * The run whose worktree holds `path` (worktreeDir's inverse, from any depth inside it), or null. Its agent wrote that
 * tree, a `.svc/runs/` there too, so it is never taken for a project (docs/engine.md "The run's plan").
 */
export function runWorktreeHolding(path: string): { project: string; run: string } | null {
  const parts = resolve(path).split(sep);
  const at = parts.findIndex((part, i) => part === '.svc' && parts[i + 1] === 'worktrees' && Boolean(parts[i + 2]));
  return at < 0 ? null : { project: parts.slice(0, at).join(sep) || sep, run: parts[at + 2]! };
}
/** The run's working tree: its worktree, else the project (what the worker works in, before it is made). */
export function runTree(state: { worktree: boolean; repo_path: string; run: string }): string {
  return state.worktree ? worktreeDir(state.repo_path, state.run) : state.repo_path;
}
export function statePath(dir: string): string {
  return join(dir, 'state.json');
}
/** The run's own key, which its shipper sends with the run (run-state.ts makeRunKey). */
export const RUN_KEY_FILE = 'run-key';
export function eventsPath(dir: string): string {
  return join(dir, 'events.jsonl');
}
export function artifactsDir(dir: string): string {
  return join(dir, 'artifacts');
}

/** Where trackera snapshots wait for a run, under a repository (or the trigger's intake folder for one). */
export const TRACKERA_INBOX = ['.svc', 'inbox', 'trackera'] as const;
