// Dedupe keys (body hashes and vendor delivery ids) claimed in the same transaction as the job they belong to.
import type { Db } from './open.ts';

export interface TriggerDedupeStore {
  /** The job that already holds any of these keys, if one does. */
  findAny(keys: readonly string[]): string | undefined;
  claim(keys: readonly string[], jobId: string, at: number): void;
}

export function createTriggerDedupeStore(db: Db): TriggerDedupeStore {
  const find = db.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?');
  const insert = db.prepare('INSERT INTO dedupe_keys (key, job_id, created_at) VALUES (?, ?, ?)');
  return {
    findAny(keys) {
      for (const key of keys) {
        const row = find.get(key) as { job_id: string } | undefined;
        if (row) return row.job_id;
      }
      return undefined;
    },
    claim(keys, jobId, at) {
      for (const key of new Set(keys)) insert.run(key, jobId, at);
    },
  };
}
