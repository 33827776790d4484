// Trigger DB retention (DESIGN §5): dedupe keys live SVC_TRIGGER_DEDUPE_DAYS (default 30), finished jobs
// SVC_TRIGGER_JOB_DAYS (default 30) but never less than the dedupe window (a job's keys are deleted with it).
// Sweeps run from a timer, one bounded batch per event-loop turn, never inside a request. Queued and running jobs
// are never pruned.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

export const DAY_MS = 86_400_000;
/** How often the server sweeps; the first sweep starts right after boot. */
export const SWEEP_MS = 10 * 60_000;
/** Rows per transaction: a few ms of work at most. */
export const BATCH = 500;

export interface TriggerRetention {
  dedupeDays: number;
  jobDays: number;
}

export interface PruneCounts {
  dedupeKeys: number;
  jobs: number;
}

/** The cut-offs for `now`: keys created before `dedupeBefore`, jobs finished before `jobsBefore` go. */
export function cutoffs(retention: TriggerRetention, now: number): { dedupeBefore: number; jobsBefore: number } {
  return {
    dedupeBefore: now - retention.dedupeDays * DAY_MS,
    jobsBefore: now - Math.max(retention.jobDays, retention.dedupeDays) * DAY_MS,
  };
}

/** One batch of work; `done` once nothing expired is left. */
export function pruneBatch(
  stores: TriggerStores, retention: TriggerRetention, now: number, limit = BATCH,
): PruneCounts & { done: boolean } {
  const { dedupeBefore, jobsBefore } = cutoffs(retention, now);
  const dedupeKeys = stores.retention.pruneDedupeKeys(dedupeBefore, limit);
  const jobs = stores.retention.pruneFinishedJobs(jobsBefore, limit);
  return { dedupeKeys, jobs, done: dedupeKeys < limit && jobs < limit };
}

/** Everything expired at `now`, synchronously (tests and tools; the server uses startTriggerRetention). */
export function pruneAll(stores: TriggerStores, retention: TriggerRetention, now: number, limit = BATCH): PruneCounts {
  const total = { dedupeKeys: 0, jobs: 0 };
  for (;;) {
    const step = pruneBatch(stores, retention, now, limit);
    total.dedupeKeys += step.dedupeKeys;
    total.jobs += step.jobs;
    if (step.done) return total;
  }
}

export interface RetentionSweeperOptions {
  stores: TriggerStores;
  retention: TriggerRetention;
  clock: () => number;
  log: Logger;
  everyMs?: number;
}

/** Sweeps now and every `everyMs`; returns stop(). A failed batch is logged and retried at the next sweep. */
export function startTriggerRetention(opts: RetentionSweeperOptions): () => void {
  const everyMs = opts.everyMs ?? SWEEP_MS;
  let stopped = false;
  let immediate: NodeJS.Immediate | undefined;
  let busy = false;
  let total: PruneCounts = { dedupeKeys: 0, jobs: 0 };

  function finish(): void {
    if (total.dedupeKeys + total.jobs > 0) {
      opts.log.info('trigger retention sweep', { dedupe_keys: total.dedupeKeys, jobs: total.jobs, ...opts.retention });
    }
    total = { dedupeKeys: 0, jobs: 0 };
    busy = false;
  }

  function account(batch: PruneCounts & { done: boolean }, now: number): void {
    total = { dedupeKeys: total.dedupeKeys + batch.dedupeKeys, jobs: total.jobs + batch.jobs };
    if (batch.done || stopped) finish();
    else immediate = setImmediate(step, now);
  }

  function failed(err: unknown): void {
    opts.log.error('trigger retention sweep failed', { error: errorMessage(err) });
    finish();
  }

  function step(now: number): void {
    immediate = undefined;
    if (stopped) return finish();
    try {
      account(pruneBatch(opts.stores, opts.retention, now), now);
    } catch (err) {
      failed(err);
    }
  }

  function sweep(): void {
    if (busy) return;
    busy = true;
    immediate = setImmediate(step, opts.clock());
  }
  sweep();
  const timer = setInterval(sweep, everyMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
    if (immediate) clearImmediate(immediate);
  };
}
