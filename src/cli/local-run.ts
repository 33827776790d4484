// A run this project holds in `.svc/runs/`, found from a folder inside it (or the folder itself when it is no git
// repository), for the commands that act on a local run before asking the Control Plane (svc answer, svc runs logs).
import { runDir } from '../engine/paths.ts';
import { tryReadState, type RunState } from '../engine/run-state.ts';
import { repoRoot } from '../engine/git.ts';

/**
 * The run's folder and state. `source` null (a bare run id) takes the project's run of that id whatever its source:
 * a run folder's name is its id, so there is only one.
 */
export function findLocalRun(dir: string, source: string | null, run: string): { dir: string; state: RunState } | null {
  const roots = [dir];
  try {
    roots.unshift(repoRoot(dir));
  } catch {
    // Not inside a git repository: DIR itself is the only place to look.
  }
  for (const root of roots) {
    const folder = runDir(root, run);
    const state = tryReadState(folder);
    if (state && (source === null || state.source === source) && state.run === run) return { dir: folder, state };
  }
  return null;
}
