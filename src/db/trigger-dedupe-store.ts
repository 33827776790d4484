// Dedupe keys (body hashes and vendor delivery ids), claimed in the same transaction as the job they belong to.
// The key is the table's primary key (trigger migration 7): SQLite finds a repeat, and no key is claimed twice.
import type { Db } from './open.ts';

export interface TriggerDedupeStore {
  /** The job that holds any of these keys: committed, or claimed earlier in the open transaction. */
  holder(keys: readonly string[]): string | undefined;
  /** Inside the job's transaction; a key repeated within one delivery is claimed once. */
  claim(keys: readonly string[], jobId: string, at: number): void;
}

export function createTriggerDedupeStore(db: Db): TriggerDedupeStore {
  const find = db.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?');
  const insert = db.prepare('INSERT OR IGNORE INTO dedupe_keys (key, job_id, created_at) VALUES (?, ?, ?)');
  return {
    holder(keys) {
      for (const key of keys) {
        const row = find.get(key) as { job_id: string } | undefined;
        if (row) return row.job_id;
      }
      return undefined;
    },
    claim(keys, jobId, at) {
      for (const key of keys) insert.run(key, jobId, at);
    },
  };
}
