// All trigger-server stores over one connection.
import type { Db } from './open.ts';
import { createTriggerJobsStore } from './trigger-jobs-store.ts';
import { createTriggerDedupeStore } from './trigger-dedupe-store.ts';
import { createTriggerRepliesStore } from './trigger-replies-store.ts';

export type TriggerStores = ReturnType<typeof createTriggerStores>;

export function createTriggerStores(db: Db) {
  return {
    db,
    jobs: createTriggerJobsStore(db),
    dedupe: createTriggerDedupeStore(db),
    replies: createTriggerRepliesStore(db),
  };
}
