// Deletes what the trigger DB no longer needs, a bounded batch per call: dedupe keys past their window, and
// finished jobs past their age (their dedupe keys and reply target go with them: ON DELETE CASCADE).
// Queued and running jobs are never touched.
import type { Db } from './open.ts';
import type { TriggerDedupeStore } from './trigger-dedupe-store.ts';
import { LIMIT_PARAM } from './limit-param.ts';

export interface TriggerRetentionStore {
  /** Deletes up to `limit` dedupe keys created before `before`; returns how many. */
  pruneDedupeKeys(before: number, limit: number): number;
  /** Deletes up to `limit` succeeded, failed or interrupted jobs that finished before `before`; returns how many. */
  pruneFinishedJobs(before: number, limit: number): number;
}

/** Expired dedupe keys go through the dedupe store, which drops them from its index too. */
export function createTriggerRetentionStore(db: Db, dedupe: TriggerDedupeStore): TriggerRetentionStore {
  // finished_at is set only by finish(), i.e. for terminal jobs; the status test keeps that an invariant here too.
  const jobs = db.prepare(
    `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?
     AND status IN ('succeeded', 'failed', 'interrupted') ORDER BY finished_at ${LIMIT_PARAM})`,
  );
  return {
    pruneDedupeKeys(before, limit) {
      return dedupe.prune(before, limit);
    },
    pruneFinishedJobs(before, limit) {
      // changes() counts the jobs only, not the rows the cascade removed with them.
      return Number(jobs.run(before, limit).changes);
    },
  };
}
