// All trigger-server stores over one connection.
import type { Db } from './open.ts';
import { createTriggerJobsStore } from './trigger-jobs-store.ts';
import { createTriggerDedupeStore, type TriggerDedupeStore } from './trigger-dedupe-store.ts';
import { createTriggerRepliesStore } from './trigger-replies-store.ts';
import { LIMIT_PARAM } from './open.ts';

export type TriggerStores = ReturnType<typeof createTriggerStores>;

export function createTriggerStores(db: Db) {
  const dedupe = createTriggerDedupeStore(db);
  return {
    db,
    jobs: createTriggerJobsStore(db),
    dedupe,
    replies: createTriggerRepliesStore(db),
    retention: createTriggerRetentionStore(db, dedupe),
  };
}

/**
 * Deletes what the trigger DB no longer needs, a bounded batch per call, each returning how many: dedupe keys past
 * their window (through the dedupe store, which drops them from its index too), and finished jobs past their age
 * (their dedupe keys and reply target go with them: ON DELETE CASCADE). Queued and running jobs are never touched.
 */
function createTriggerRetentionStore(db: Db, dedupe: TriggerDedupeStore) {
  // finished_at is set only by finish(), i.e. for terminal jobs; the status test keeps that an invariant here too.
  const jobs = db.prepare(
    `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?
     AND status IN ('succeeded', 'failed', 'interrupted') ORDER BY finished_at ${LIMIT_PARAM})`,
  );
  return {
    pruneDedupeKeys(before: number, limit: number): number {
      return dedupe.prune(before, limit);
    },
    pruneFinishedJobs(before: number, limit: number): number {
      // changes() counts the jobs only, not the rows the cascade removed with them.
      return Number(jobs.run(before, limit).changes);
    },
  };
}
