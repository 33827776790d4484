// Trigger DB retention (DESIGN §5): dedupe keys expire after SVC_TRIGGER_DEDUPE_DAYS, finished jobs after
// SVC_TRIGGER_JOB_DAYS but never before their keys; queued and running jobs never. Swept from a timer, one bounded
// batch per event-loop turn, never inside a request.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';
import { DAY_MS } from '../iso-time.ts';
import type { TriggerSettings } from './settings.ts';

const SWEEP_MS = 10 * 60_000;
/** Rows per transaction: a few ms of work at most. */
const BATCH = 500;

export type TriggerRetention = TriggerSettings['retention'];

/** One batch of work; `done` once nothing expired is left. Jobs stay at least as long as their dedupe keys. */
export function pruneBatch(stores: TriggerStores, retention: TriggerRetention, now: number) {
  const claims = stores.dedupe.prune(now - retention.dedupeDays * DAY_MS, BATCH);
  // The claims are read by row id, not time: a full window that freed some may have more expired claims past it.
  const moreClaims = claims.scanned === BATCH && claims.claims > 0;
  const jobsBefore = now - Math.max(retention.jobDays, retention.dedupeDays) * DAY_MS;
  // Jobs after the claims, which they outlive (a job whose claim is left waits for it: kept longer, never shorter).
  const jobs = moreClaims ? 0 : stores.jobs.pruneFinished(jobsBefore, BATCH);
  return { dedupeKeys: claims.keys, jobs, done: !moreClaims && jobs < BATCH };
}

/** Sweeps now and every SWEEP_MS; returns stop(). A failed batch is logged and retried at the next sweep. */
export function startTriggerRetention(
  opts: { stores: TriggerStores; retention: TriggerRetention; clock: () => number; log: Logger },
): () => void {
  // Set while a sweep is under way, so a timer tick starts no second one.
  let immediate: NodeJS.Immediate | undefined;

  function step(now: number, total: { dedupeKeys: number; jobs: number }): void {
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
