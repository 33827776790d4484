// Whose turn it is when a slot frees (docs/trigger.md "Dispatch order"): the job loop's fairness between served
// repositories and routes, from what it counts of the jobs it runs and the queue's (repository, route) pairs. It
// starts and records nothing itself.
import type { JobRow, TriggerJobsStore } from '../db/trigger-jobs-store.ts';

// Keys are `repo:<name>` and `origin:<name>`; `served` holds the start counter's value when a key last had a job
// started.
export interface Turns {
  active: Map<string, number>;
  served: Map<string, number>;
  starts: number;
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

function older(a: JobRow, b: JobRow): boolean {
  return a.created_at < b.created_at || (a.created_at === b.created_at && a.id < b.id);
}

export function pickNext(jobs: TriggerJobsStore, turns: Turns, repoCap: number): JobRow | undefined {
  let best: { order: number[]; head: JobRow } | undefined;
  for (const group of jobs.queuedGroups()) {
    const [origin, repo] = keysOf(group);
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

function keysOf(job: Pick<JobRow, 'origin' | 'repo'>): [string, string] {
  return [`origin:${job.origin}`, `repo:${job.repo ?? ''}`];
}

export function countActive(turns: Turns, job: Pick<JobRow, 'origin' | 'repo'>, by: 1 | -1): void {
  for (const key of keysOf(job)) turns.active.set(key, (turns.active.get(key) ?? 0) + by);
}

export function markServed(turns: Turns, job: Pick<JobRow, 'origin' | 'repo'>): void {
  for (const key of keysOf(job)) turns.served.set(key, turns.starts);
  turns.starts++;
}
