// One repository, one name (issue 23 item 9). A run's `repo` is read from the checkout when the run is made
// (repo-name.ts: its origin's owner/name, else its folder name), so a checkout that gains an origin, or moves to
// another one, would show in the Control Plane under two names: its earlier runs under the old one. The first run
// made under a new name therefore renames the checkout's earlier runs that have ended, records it in each run's own
// events, and leaves them for shipping (ship-pending.ts), so every list, filter and stat shows the one current name.
// Receipts are never touched: each keeps the name it was signed with, which is what the evidence was about.
//
// The last name svc used is kept in the repository's git directory (`svc-repo-name`), which the agent's sandbox
// mounts read-only, so an agent can't make svc rename runs; a run with no change costs one small file read.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runDir } from './paths.ts';
import { isoNow, tryReadState, writeState } from './run-state.ts';
import { openEventLog } from './events-log.ts';
import { markPending } from './ship-pending.ts';
import { isValidSegment } from './ids.ts';
import { writeNoFollow } from './safe-fs.ts';
import { TERMINAL } from '../run-json.ts';
import { isWebhookOrigin } from './classify.ts';

const MARKER = 'svc-repo-name';

export interface RepoRename {
  to: string;
  /** The names the renamed runs had, each once. */
  from: string[];
  runs: number;
}

function lastName(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function localRuns(repo: string): string[] {
  try {
    return readdirSync(join(repo, '.svc', 'runs')).filter(isValidSegment);
  } catch {
    return [];
  }
}

/**
 * Gives this checkout's ended runs the name `name` when it differs from the last name svc used here; null when
 * nothing was renamed. `gitDir` is the repository's common git directory (git.ts gitCommonDir). Runs still going
 * keep their name for now (their worker owns their state): the marker is then left as it was, so the next new run
 * looks again and renames them once they have ended.
 */
export function adoptRepoName(repo: string, gitDir: string, name: string): RepoRename | null {
  const marker = join(gitDir, MARKER);
  if (lastName(marker) === name) return null;
  const from = new Set<string>();
  let runs = 0;
  let going = 0;
  const now = isoNow();
  for (const run of localRuns(repo)) {
    const dir = runDir(repo, run);
    const state = tryReadState(dir);
    if (!state || state.repo === name || state.repo_path !== repo) continue;
    // A run a trigger server started carries the name its job was routed to: that is not the checkout's to change.
    if (isWebhookOrigin(state.origin)) continue;
    if (!TERMINAL.has(state.status)) {
      going += 1;
      continue;
    }
    from.add(state.repo);
    writeState(dir, { ...state, repo: name, updated_at: now });
    openEventLog(dir).append('log', { stream: 'svc', text: `repository renamed from ${state.repo} to ${name}` });
    markPending(dir);
    runs += 1;
  }
  if (going === 0) writeNoFollow(marker, `${name}\n`);
  return runs ? { to: name, from: [...from].sort(), runs } : null;
}
