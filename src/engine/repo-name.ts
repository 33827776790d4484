// The repository name a run records, and the rename of the checkout's earlier runs (docs/engine.md).
import { join } from 'node:path';
import { repoName } from './git.ts';
import { appendEvent, localRuns, writeState, type Found, type RunState } from './run-state.ts';
import { runDir } from './paths.ts';
import { markPending } from './shipper.ts';
import { writeNoFollow } from './safe-fs.ts';
import { readAgentFile } from './plain-tree.ts';
import { TERMINAL } from '../run-json.ts';
import { isWebhookOrigin } from './spec.ts';
import { procStart } from './proc-group.ts';

// GitHub's own limits: an owner is 1-39 alphanumerics or single hyphens; a name 1-100 of [A-Za-z0-9._-].
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

export function isRepoName(text: string): boolean {
  const [owner, name, extra] = text.split('/');
  if (extra !== undefined || !owner || !name) return false;
  return OWNER.test(owner) && NAME.test(name) && name !== '.' && name !== '..' && !name.toLowerCase().endsWith('.git');
}

/** SVC_REPO_NAME names only a run a trigger server started (a webhook origin, which only a launcher sets). */
export function runRepoName(dir: string, env: NodeJS.ProcessEnv): string {
  return isRoutedRepoName(env) ? env.SVC_REPO_NAME! : repoName(dir);
}

/** Whether the run's name is the one a trigger server routed its job to (see runRepoName). */
export function isRoutedRepoName(env: NodeJS.ProcessEnv): boolean {
  const routed = env.SVC_REPO_NAME;
  return isWebhookOrigin(env.SVC_ORIGIN) && routed !== undefined && isRepoName(routed);
}

const MAX_NAMES_BYTES = 1024 * 1024;

/** `path → name` from the names file; a file that is missing or a link reads as empty. */
function readNames(file: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const line of (readAgentFile(file, MAX_NAMES_BYTES) ?? '').split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) names.set(line.slice(tab + 1), line.slice(0, tab));
  }
  return names;
}

/** The fields the rename reads, as the strings svc writes; anything else is not a run svc wrote. */
function isRenamable(state: RunState): boolean {
  return (['repo', 'repo_path', 'status', 'origin'] as const).every((key) => typeof state[key] === 'string');
}

/** Whether the worker a run's state names is still that process (pid and start time): then it owns the state. */
export function workerAlive(state: Pick<RunState, 'pid' | 'proc_start'>): boolean {
  if (typeof state.pid !== 'number') return false;
  const started = procStart(state.pid);
  return started !== null && (state.proc_start === null || state.proc_start === started);
}

/** A run just made has no worker yet; one still without a worker this long after its last write never gets one. */
const UNSTARTED_GRACE_MS = 60_000;

/** How long ago a state with no worker recorded was last written; NaN with a worker, or with no valid time. */
function ageWithoutWorker(state: { pid?: unknown; updated_at?: unknown }, now: number): number {
  if (state.pid !== null && state.pid !== undefined) return NaN;
  return now - (typeof state.updated_at === 'string' ? Date.parse(state.updated_at) : NaN);
}

/** No worker recorded and none coming: its state was last written (made, resumed, stopped) over the grace ago. */
export function noWorkerComing(state: { pid?: unknown; updated_at?: unknown }, now: number): boolean {
  // A state with no time of its own svc did not write: nothing says how old it is.
  return ageWithoutWorker(state, now) >= UNSTARTED_GRACE_MS;
}

/** No worker recorded yet, and one may still come: its state was last written (made, resumed) under the grace ago. */
export function workerComing(state: { pid?: unknown; updated_at?: unknown }, now: number): boolean {
  return ageWithoutWorker(state, now) < UNSTARTED_GRACE_MS;
}

/** Renames one run; false when it could not be (a link, a folder svc can't write): left for a later start. */
function rename(repo: string, found: Found, name: string, now: string): boolean {
  const dir = runDir(repo, found.run);
  try {
    writeState(dir, { ...found.state, repo: name, updated_at: now });
    appendEvent(dir, 'log', { stream: 'svc', text: `repository renamed from ${found.state.repo} to ${name}` });
    markPending(dir);
    return true;
  } catch {
    return false;
  }
}

export type RepoRename = NonNullable<ReturnType<typeof adoptRepoName>>;

/**
 * Gives this checkout's ended runs `name` when it differs from the last name svc used here (`from`: the names they
 * had), else null. The name is recorded only once no run is left to rename: the next start looks at those again.
 */
export function adoptRepoName(repo: string, gitDir: string, name: string) {
  try {
    const file = join(gitDir, 'info', 'svc-repo-names');
    const names = readNames(file);
    if (names.get(repo) === name) return null;
    const from = new Set<string>();
    let renamed = 0;
    let left = 0;
    const now = new Date().toISOString();
    for (const found of localRuns(repo, { strict: true })) {
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
    if (renamed === 0 && left === 0) {
      writeNoFollow(file, [...names.set(repo, name)].map(([path, named]) => `${named}\t${path}\n`).join(''));
    }
    return renamed ? { to: name, from: [...from].sort(), runs: renamed } : null;
  } catch {
    // Never the reason a run does not start: the next start tries again.
    return null;
  }
}
