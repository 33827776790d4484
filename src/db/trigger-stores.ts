// All trigger-server stores over one connection.
import type { Db } from './open.ts';
import { createTriggerJobsStore, type TriggerJobsStore } from './trigger-jobs-store.ts';
import { createTriggerDedupeStore, type TriggerDedupeStore } from './trigger-dedupe-store.ts';
import { createTriggerRepliesStore, type TriggerRepliesStore } from './trigger-replies-store.ts';
import { createTriggerRetentionStore, type TriggerRetentionStore } from './trigger-retention-store.ts';

export interface TriggerStores {
  db: Db;
  jobs: TriggerJobsStore;
  dedupe: TriggerDedupeStore;
  replies: TriggerRepliesStore;
  retention: TriggerRetentionStore;
}

export function createTriggerStores(db: Db): TriggerStores {
  const dedupe = createTriggerDedupeStore(db);
  return {
    db,
    jobs: createTriggerJobsStore(db),
    dedupe,
    replies: createTriggerRepliesStore(db),
    retention: createTriggerRetentionStore(db, dedupe),
  };
}
