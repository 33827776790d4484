// One repository, one name. A run's `repo` is read from the checkout when the run is made
// (repo-name.ts: its origin's owner/name, else its folder name), so a checkout that gains an origin, or moves to
// another one, would show in the Control Plane under two names: its earlier runs under the old one. The first run
// made under a new name therefore renames the checkout's earlier runs that have ended, records it in each run's own
// events, and leaves them for shipping (ship-pending.ts), so every list, filter and stat shows the one current name.
// Receipts are never touched: each keeps the name it was signed with, which is what the evidence was about.
//
// The last name svc used for each checkout is kept in the repository's `info/svc-repo-names` (one `name<TAB>path`
// line per checkout, so linked worktrees don't share one), which both the agent's sandbox and svc's git sandbox mount
// read-only: an agent can't make svc rename runs, and a start whose name did not change costs one small file read.
// The scan reads the run folders the way every other reader of a project does (plain-tree.ts: no link followed, no
// FIFO opened, a size cap), skips run folders git tracks (a cloned repository's, not this machine's), and never fails
// the start it runs in: a run it cannot rename is left for the next start.
import { join } from 'node:path';
import { writeState, type RunState } from './run-state.ts';
import { isoNow } from '../iso-time.ts';
import { runDir } from './paths.ts';
import { openEventLog } from './events-log.ts';
import { markPending } from './ship-pending.ts';
import { writeNoFollow } from './safe-fs.ts';
import { readAgentFile } from './plain-tree.ts';
import { localRuns, type Found } from './local-runs.ts';
import { TERMINAL } from '../run-json.ts';
import { isWebhookOrigin } from './classify.ts';
import { procStart } from './proc-group.ts';

const NAMES_FILE = join('info', 'svc-repo-names');
const MAX_NAMES_BYTES = 1024 * 1024;

export interface RepoRename {
  to: string;
  /** The names the renamed runs had, each once. */
  from: string[];
  runs: number;
}

/** `path → name` from the names file; a file that is missing, a link or too large reads as empty. */
function readNames(file: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const line of (readAgentFile(file, MAX_NAMES_BYTES) ?? '').split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) names.set(line.slice(tab + 1), line.slice(0, tab));
  }
  return names;
}

function writeNames(file: string, names: Map<string, string>): void {
  writeNoFollow(file, [...names].map(([path, name]) => `${name}\t${path}\n`).join(''));
}

/** The fields the rename reads, as the strings svc writes; anything else is not a run svc wrote. */
function isRenamable(state: RunState): boolean {
  const value = state as unknown as Record<string, unknown>;
  return ['repo', 'repo_path', 'status', 'origin'].every((key) => typeof value[key] === 'string');
}

/**
 * Whether the worker a run's state names is still that process (pid and start time): it owns the state then. A run
 * left `running` by a worker that died is nobody's, and is renamed like an ended one.
 */
export function workerAlive(state: RunState): boolean {
  if (typeof state.pid !== 'number') return false;
  const started = procStart(state.pid);
  return started !== null && (state.proc_start === null || state.proc_start === started);
}

/** Renames one run; false when it could not be (a link, a folder svc can't write): left for a later start. */
function rename(repo: string, found: Found, name: string, now: string): boolean {
  const dir = runDir(repo, found.run);
  try {
    writeState(dir, { ...found.state, repo: name, updated_at: now });
    openEventLog(dir).append('log', { stream: 'svc', text: `repository renamed from ${found.state.repo} to ${name}` });
    markPending(dir);
    return true;
  } catch {
    return false;
  }
}

/**
 * Gives this checkout's ended runs the name `name` when it differs from the last name svc used here; null when
 * nothing was renamed. `gitDir` is the repository's common git directory (git.ts gitCommonDir). The name is recorded
 * only after a scan that found nothing left to rename: runs whose worker is still alive (it owns their state, and a
 * resumed or re-verified run's worker may write the old name back), or that could not be renamed, are looked at again
 * by the next start.
 */
export function adoptRepoName(repo: string, gitDir: string, name: string): RepoRename | null {
  try {
    const file = join(gitDir, NAMES_FILE);
    const names = readNames(file);
    if (names.get(repo) === name) return null;
    const from = new Set<string>();
    let renamed = 0;
    let left = 0;
    const now = isoNow();
    for (const found of localRuns(repo)) {
      const { state } = found;
      if (!isRenamable(state) || state.repo === name || state.repo_path !== repo) continue;
      // A run a trigger server started carries the name its job was routed to: that is not the checkout's to change.
      if (isWebhookOrigin(state.origin)) continue;
      if ((!TERMINAL.has(state.status) && workerAlive(state)) || !rename(repo, found, name, now)) {
        left += 1;
        continue;
      }
      from.add(state.repo);
      renamed += 1;
    }
    if (renamed === 0 && left === 0) writeNames(file, names.set(repo, name));
    return renamed ? { to: name, from: [...from].sort(), runs: renamed } : null;
  } catch {
    // Never the reason a run does not start: the next start tries again.
    return null;
  }
}
