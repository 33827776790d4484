// Dedupe keys (body hashes and vendor delivery ids), claimed in the same transaction as the job they belong to.
// A key is stored as the first 22 base64url characters (132 bits) of its SHA-256 (trigger migration 8): a short
// primary key keeps the B-tree small, so a claim dirties fewer pages; two different keys never meet in practice.
import { hash } from 'node:crypto';
import { inTransaction, type Db } from './open.ts';

/** A string, not a BLOB: a Buffer per key cost ~1 µs more than the hash. */
function digest(key: string): string {
  return hash('sha256', key, 'base64url').slice(0, 22);
}

export interface TriggerDedupeStore {
  /** The job that holds any of these keys: committed, or claimed earlier in the open transaction. */
  holder(keys: readonly string[]): string | undefined;
  /** Claims the keys in the job's transaction, or returns another job that holds one (a repeated key counts once). */
  claim(keys: readonly string[], jobId: string): string | undefined;
}

export function createTriggerDedupeStore(db: Db): TriggerDedupeStore {
  const find = db.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?');
  const add = db.prepare('INSERT INTO dedupe_keys (key, job_id) VALUES (?, ?) ON CONFLICT DO NOTHING');
  // SQL has no SHA-256: the text keys migration 8 set aside are hashed here, once.
  inTransaction(db, () => {
    if (!db.prepare("SELECT 1 FROM sqlite_schema WHERE name = 'dedupe_keys_text'").get()) return;
    for (const row of db.prepare('SELECT key, job_id FROM dedupe_keys_text ORDER BY created_at').iterate()) {
      add.run(digest(row.key as string), row.job_id as string);
    }
    db.exec('DROP TABLE dedupe_keys_text');
  });
  return {
    holder(keys) {
      for (const key of keys) {
        const row = find.get(digest(key)) as { job_id: string } | undefined;
        if (row) return row.job_id;
      }
      return undefined;
    },
    claim(keys, jobId) {
      for (const key of keys) {
        const hashed = digest(key);
        if (add.run(hashed, jobId).changes === 1) continue;
        const holder = (find.get(hashed) as { job_id: string }).job_id;
        if (holder !== jobId) return holder;
      }
      return undefined;
    },
  };
}
