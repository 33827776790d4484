// Everything a trigger handler may touch, passed in (STYLE habit 2): tests build this with temp paths.
import type { TriggerSettings } from './settings.ts';
import type { GithubApi } from './github-api.ts';
import type { TriggerJobsStore } from '../db/trigger-jobs-store.ts';
import type { JobQueue } from './queue.ts';
import type { Logger } from '../log.ts';
import type { TriggerMetrics } from './metrics.ts';

export interface TriggerDeps {
  settings: TriggerSettings;
  queue: JobQueue;
  clock: () => number;
  log: Logger;
  /** GitHub's REST API (pull request follow-ups: read the PR and its review, reply). */
  github: GithubApi;
  /** The jobs of a pull request svc opened (sources/github-pr.ts). */
  pulls: Pick<TriggerJobsStore, 'onPullRequestBranch'>;
  /** Deliveries refused because no served repository takes them (GET /status). */
  skips: SkipCounts;
  /** The server listens and has not begun to shut down (GET /ready). */
  accepting: () => boolean;
  /** GET /metrics's series, and the counts every route adds to. */
  metrics: TriggerMetrics;
}

/** Deliveries refused because no served repository takes them, per route: this process's traffic, not the queue. */
export interface SkipCounts {
  count(route: string): void;
  snapshot(): Record<string, number>;
}

export function createSkipCounts(): SkipCounts {
  const counts = new Map<string, number>();
  return {
    count: (route) => counts.set(route, (counts.get(route) ?? 0) + 1),
    snapshot: () => Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b))),
  };
}
