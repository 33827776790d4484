// Whose turn it is when a slot frees (issues 21, 22): among the queued (repository, origin) pairs whose repository
// is below its own concurrency, the one whose repository has the fewest active jobs, then whose origin has, then
// the repository and origin served longest ago, then the older head job. So 50 jobs queued for repository A delay
// a job for B by at most the one slot that frees first, and a flood on one route does not starve another route.
import type { JobRow, TriggerJobsStore } from '../db/trigger-jobs-store.ts';

/** The job loop's in-memory view of who is running: keys are `repo:<name>` and `origin:<name>`. */
export interface Turns {
  active: Map<string, number>;
  /** The start counter's value when each key last had a job started (never: absent, i.e. first in line). */
  served: Map<string, number>;
  starts: number;
}

interface Candidate {
  order: number[];
  head: JobRow;
}

/** Negative when `a` comes first, positive when `b` does, 0 on a tie. */
function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

function older(a: JobRow, b: JobRow): boolean {
  return a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id);
}

/** The next job to start, or undefined when nothing queued may start now. */
export function pickNext(jobs: TriggerJobsStore, turns: Turns, repoCap: number): JobRow | undefined {
  let best: Candidate | undefined;
  for (const group of jobs.queuedGroups()) {
    const repo = `repo:${group.repo ?? ''}`;
    const origin = `origin:${group.origin}`;
    const repoActive = turns.active.get(repo) ?? 0;
    if (repoActive >= repoCap) continue;
    const originActive = turns.active.get(origin) ?? 0;
    const order = [repoActive, originActive, turns.served.get(repo) ?? -1, turns.served.get(origin) ?? -1];
    // The counts decide first; the head job is read only for a pair that could win.
    const versus = best ? compare(order, best.order) : -1;
    if (versus > 0) continue;
    const head = jobs.oldestQueuedIn(group.repo, group.origin);
    if (head && (versus < 0 || older(head, best!.head))) best = { order, head };
  }
  return best?.head;
}

/** The keys a job counts under: its origin and its repository. */
function keysOf(job: Pick<JobRow, 'origin' | 'repo'>): [string, string] {
  return [`origin:${job.origin}`, `repo:${job.repo ?? ''}`];
}

function bump(turns: Turns, key: string, by: number): void {
  const n = (turns.active.get(key) ?? 0) + by;
  if (n > 0) turns.active.set(key, n);
  else turns.active.delete(key);
}

/** A job of `job`'s origin and repository started (+1) or ended (-1). */
export function countActive(turns: Turns, job: Pick<JobRow, 'origin' | 'repo'>, by: 1 | -1): void {
  for (const key of keysOf(job)) bump(turns, key, by);
}

/** Records that `job`'s origin and repository just had their turn. */
export function markServed(turns: Turns, job: Pick<JobRow, 'origin' | 'repo'>): void {
  const [origin, repo] = keysOf(job);
  turns.served.set(origin, turns.starts);
  turns.served.set(repo, turns.starts++);
}

