// Trigger DB retention (DESIGN §5): dedupe keys live SVC_TRIGGER_DEDUPE_DAYS (default 30), finished jobs
// SVC_TRIGGER_JOB_DAYS (default 30) but never less than the dedupe window (a job's keys are deleted with it).
// Sweeps run from a timer, one bounded batch per event-loop turn, never inside a request. Queued and running jobs
// are never pruned.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

export const DAY_MS = 86_400_000;
/** How often the server sweeps; the first sweep starts right after boot. */
const SWEEP_MS = 10 * 60_000;
/** Rows per transaction: a few ms of work at most. */
export const BATCH = 500;

export interface TriggerRetention {
  dedupeDays: number;
  jobDays: number;
}

interface PruneCounts {
  dedupeKeys: number;
  jobs: number;
}

/** One batch of work; `done` once nothing expired is left. Jobs stay at least as long as their dedupe keys. */
export function pruneBatch(
  stores: TriggerStores, retention: TriggerRetention, now: number, limit = BATCH,
): PruneCounts & { done: boolean } {
  const dedupeKeys = stores.dedupe.prune(now - retention.dedupeDays * DAY_MS, limit);
  const jobsBefore = now - Math.max(retention.jobDays, retention.dedupeDays) * DAY_MS;
  const jobs = stores.jobs.pruneFinished(jobsBefore, limit);
  return { dedupeKeys, jobs, done: dedupeKeys < limit && jobs < limit };
}

/** Sweeps now and every SWEEP_MS; returns stop(). A failed batch is logged and retried at the next sweep. */
export function startTriggerRetention(
  opts: { stores: TriggerStores; retention: TriggerRetention; clock: () => number; log: Logger },
): () => void {
  // Set while a sweep is under way: a timer tick then starts no second one.
  let immediate: NodeJS.Immediate | undefined;

  function step(now: number, total: PruneCounts): void {
    immediate = undefined;
    try {
      const batch = pruneBatch(opts.stores, opts.retention, now);
      total = { dedupeKeys: total.dedupeKeys + batch.dedupeKeys, jobs: total.jobs + batch.jobs };
      if (!batch.done) {
        immediate = setImmediate(step, now, total);
        return;
      }
    } catch (err) {
      opts.log.error('trigger retention sweep failed', { error: errorMessage(err) });
    }
    if (total.dedupeKeys + total.jobs > 0) {
      opts.log.info('trigger retention sweep', { dedupe_keys: total.dedupeKeys, jobs: total.jobs, ...opts.retention });
    }
  }

  function sweep(): void {
    immediate ??= setImmediate(step, opts.clock(), { dedupeKeys: 0, jobs: 0 });
  }
  sweep();
  const timer = setInterval(sweep, SWEEP_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    if (immediate) clearImmediate(immediate);
  };
}
