// Runs queued jobs with a concurrency limit: launch `svc start … --detach`, follow the run to its end, then notify.
// A job ends when its run ends (DESIGN §5); shutdown leaves queued jobs queued and running jobs re-attachable.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { JobExecutor, RunOutcome, RunRef } from './executor.ts';
import { buildSummaryParts, plainSummary } from './summary.ts';
import type { Logger } from '../log.ts';

export interface Runner {
  /** Start as many queued jobs as free slots allow. */
  kick(): void;
  /** After a restart: re-attach running jobs to their runs (or mark them interrupted), resend missed summaries, run the queue. */
  recover(): void;
  /** Stop taking jobs, let in-flight launches record their run, stop following; resolves when idle. */
  close(): Promise<void>;
  active(): number;
  /** Resolves once no job is active (tests and shutdown). */
  idle(): Promise<void>;
}

export interface RunnerOptions {
  stores: TriggerStores;
  executor: JobExecutor;
  concurrency: number;
  clock: () => number;
  log: Logger;
  controlUrl: string | undefined;
  /** Sends the completion summary; must never throw (notify.ts guarantees it). */
  notify: (jobId: string) => Promise<void>;
}

export function createRunner(opts: RunnerOptions): Runner {
  const { stores, executor, log } = opts;
  const abort = new AbortController();
  const tasks = new Set<Promise<void>>();
  let closed = false;
  let idleWaiters: Array<() => void> = [];

  // Active jobs per origin, and when each origin last had a job started: the next job comes from the origin with
  // the fewest active, then the one served longest ago, so a flood on one route does not make another route's
  // jobs wait behind all of it (issue 21). Within an origin, oldest first.
  const activeByOrigin = new Map<string, number>();
  const lastStarted = new Map<string, number>();
  let starts = 0;

  function track(origin: string, task: Promise<void>): void {
    tasks.add(task);
    activeByOrigin.set(origin, (activeByOrigin.get(origin) ?? 0) + 1);
    void task.finally(() => {
      tasks.delete(task);
      const left = (activeByOrigin.get(origin) ?? 1) - 1;
      if (left > 0) activeByOrigin.set(origin, left);
      else activeByOrigin.delete(origin);
      if (!closed) kick();
      if (tasks.size === 0) {
        const waiters = idleWaiters;
        idleWaiters = [];
        for (const w of waiters) w();
      }
    });
  }

  function finish(job: JobRow, status: 'succeeded' | 'failed' | 'interrupted', run: RunRef | null, outcome: RunOutcome | null, exitCode: number | null, error: string | null): void {
    const now = opts.clock();
    const startedMs = outcome?.started_at ? Date.parse(outcome.started_at) : (job.started_at ?? now);
    const endedMs = outcome?.ended_at ? Date.parse(outcome.ended_at) : now;
    const durationMs = endedMs - startedMs;
    const parts = buildSummaryParts({ jobId: job.id, status, run, outcome, durationMs, error, controlUrl: opts.controlUrl });
    const summary = plainSummary(parts);
    const summary_parts = JSON.stringify(parts);
    stores.jobs.finish(job.id, { status, finished_at: now, exit_code: exitCode, summary, summary_parts, error });
    log.info('job finished', { job_id: job.id, status, run: run ? `${run.source}/${run.run}` : null });
  }

  async function followToEnd(job: JobRow, run: RunRef, reattach: boolean): Promise<void> {
    const outcome = await executor.follow(run, abort.signal, { reattach });
    if (outcome === 'aborted') return; // shutting down: stays running, re-attached on restart
    if (outcome === null) {
      const status = reattach ? 'interrupted' : 'failed';
      finish(job, status, run, null, null, reattach ? 'run state not found after restart' : 'run state never appeared');
    } else {
      const status = outcome.status === 'succeeded' ? 'succeeded' : 'failed';
      const error = outcome.status === 'stopped' ? 'run stopped' : outcome.status === 'failed' ? (outcome.error ?? 'run failed') : null;
      finish(job, status, run, outcome, null, error);
    }
    await opts.notify(job.id);
  }

  async function runJob(job: JobRow): Promise<void> {
    log.info('job started', { job_id: job.id, origin: job.origin });
    const launched = await executor.launch({ id: job.id, args: job.args, origin: job.origin });
    if (!launched.run || launched.error) {
      finish(job, 'failed', null, null, launched.exitCode, launched.error ?? 'launch failed');
      await opts.notify(job.id);
      return;
    }
    stores.jobs.setRun(job.id, launched.run.source, launched.run.run, launched.exitCode);
    await followToEnd(job, launched.run, false);
  }

  function guarded(job: JobRow, work: Promise<void>): Promise<void> {
    return work.catch((err: unknown) => {
      log.error('job crashed', { job_id: job.id, error: err instanceof Error ? err.message : String(err) });
      try {
        finish(job, 'failed', null, null, null, 'internal error while running the job');
      } catch {
        // the DB is gone (shutdown); the job is re-attached or interrupted on restart
      }
    });
  }

  /** Orders candidate origins: fewest active jobs, then served longest ago, then the older head job. */
  function before(a: { active: number; served: number; head: JobRow }, b: typeof a): boolean {
    if (a.active !== b.active) return a.active < b.active;
    if (a.served !== b.served) return a.served < b.served;
    return a.head.created_at < b.head.created_at || (a.head.created_at === b.head.created_at && a.head.id < b.head.id);
  }

  /** The oldest queued job of the origin that is next in turn. */
  function nextFair(): JobRow | undefined {
    let best: { active: number; served: number; head: JobRow } | undefined;
    for (const origin of stores.jobs.queuedByOrigin().keys()) {
      const head = stores.jobs.oldestQueued(origin);
      if (!head) continue;
      const candidate = { active: activeByOrigin.get(origin) ?? 0, served: lastStarted.get(origin) ?? -1, head };
      if (!best || before(candidate, best)) best = candidate;
    }
    return best?.head;
  }

  function kick(): void {
    if (closed) return;
    // A failed claim means another dispatcher took that job: bounded retries, then the next kick tries again.
    for (let tries = 0; tasks.size < opts.concurrency && tries < opts.concurrency * 2; tries++) {
      const job = nextFair();
      if (!job) return;
      if (!stores.jobs.claim(job.id, opts.clock())) continue;
      const claimed = { ...job, status: 'running' as const, started_at: opts.clock() };
      lastStarted.set(job.origin, starts++);
      track(job.origin, guarded(claimed, runJob(claimed)));
    }
  }

  function recover(): void {
    for (const job of stores.jobs.listRunning()) {
      if (job.run_source && job.run_id) {
        log.info('re-attaching job to its run', { job_id: job.id, run: `${job.run_source}/${job.run_id}` });
        track(job.origin, guarded(job, followToEnd(job, { source: job.run_source, run: job.run_id }, true)));
      } else {
        // It was launching when the server stopped: which run it started (if any) is unknown.
        finish(job, 'interrupted', null, null, null, 'the server stopped before the run was recorded');
        void opts.notify(job.id);
      }
    }
    for (const jobId of stores.replies.listPending()) void opts.notify(jobId);
    kick();
  }

  return {
    kick,
    recover,
    active: () => tasks.size,
    idle() {
      return tasks.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
    async close() {
      closed = true;
      abort.abort();
      await Promise.allSettled([...tasks]);
    },
  };
}
