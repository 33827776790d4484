// Dedupe keys (body hashes and vendor delivery ids), claimed in the same transaction as the job they belong to.
// The key is the table's primary key (trigger migration 7): a claim is one INSERT, and SQLite finds a repeat.
import type { Db } from './open.ts';

export interface TriggerDedupeStore {
  /** The job that holds any of these keys: committed, or claimed earlier in the open transaction. */
  holder(keys: readonly string[]): string | undefined;
  /** Claims the keys in the job's transaction, or returns another job that holds one (a repeated key counts once). */
  claim(keys: readonly string[], jobId: string, at: number): string | undefined;
}

export function createTriggerDedupeStore(db: Db): TriggerDedupeStore {
  const find = db.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?');
  const add = db.prepare('INSERT INTO dedupe_keys (key, job_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING');
  return {
    holder(keys) {
      for (const key of keys) {
        const row = find.get(key) as { job_id: string } | undefined;
        if (row) return row.job_id;
      }
      return undefined;
    },
    claim(keys, jobId, at) {
      for (const key of keys) {
        if (add.run(key, jobId, at).changes === 1) continue;
        const holder = (find.get(key) as { job_id: string }).job_id;
        if (holder !== jobId) return holder;
      }
      return undefined;
    },
  };
}
