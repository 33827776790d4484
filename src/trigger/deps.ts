// Everything a trigger handler may touch, passed in (STYLE habit 2): tests build this with temp paths.
import type { TriggerSettings } from './settings.ts';
import type { GithubApi } from './github-api.ts';
import type { TriggerJobsStore } from '../db/trigger-jobs-store.ts';
import type { JobQueue } from './queue.ts';
import type { Logger } from '../log.ts';
import type { TriggerMetrics } from './metrics.ts';
import type { AnswerDesk } from './answers.ts';
import type { Poster } from './https-post.ts';
import type { Tracer } from '../trace.ts';

export interface TriggerDeps {
  settings: TriggerSettings;
  queue: JobQueue;
  clock: () => number;
  log: Logger;
  /** Pull request follow-ups: read the PR and its review, reply. */
  github: GithubApi;
  /** The jobs of a pull request svc opened (sources/github-pr.ts). */
  pulls: Pick<TriggerJobsStore, 'onPullRequestBranch'>;
  skips: ReturnType<typeof createSkipCounts>;
  /** The server listens and has not begun to shut down (GET /ready). */
  accepting: () => boolean;
  metrics: TriggerMetrics;
  answers: AnswerDesk;
  /** A handler's own vendor calls (who is on a tracker issue's team), as the notifier sends. */
  post: Poster;
  tracer: Tracer;
  /** A request met a busy database (db/open.ts busyMet). */
  busyMet: () => void;
}

/** Deliveries refused because no served repository takes them, per route, since this process started (GET /status). */
export function createSkipCounts() {
  const counts = new Map<string, number>();
  return {
    count: (route: string) => void counts.set(route, (counts.get(route) ?? 0) + 1),
    snapshot: () => Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b))),
  };
}
