// The git a start request needs, behind one interface the handlers get in deps: which repository holds a
// folder, and its "owner/name". Handlers never run git themselves; they stay (ctx) => Reply over their deps.
import { repoRoot, repoName } from '../engine/git.ts';

export interface RepoReader {
  /** The root of the git repository holding `dir`, or null when `dir` is in none (or git cannot read it). */
  rootOf(dir: string): string | null;
  /** "owner/name" from the repository's origin remote, else its folder name. */
  nameOf(root: string): string;
}

/** Reads repositories with the host's git (hardened: no hooks, no fsmonitor; see engine/git.ts). */
export function createRepoReader(): RepoReader {
  return {
    rootOf(dir) {
      try {
        return repoRoot(dir);
      } catch {
        return null;
      }
    },
    nameOf: repoName,
  };
}
