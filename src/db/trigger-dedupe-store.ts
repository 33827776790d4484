// Dedupe keys (body hashes and vendor delivery ids) claimed in the same transaction as the job they belong to.
//
// The keys are random (sha256, GUIDs), so a B-tree index on them put every claim on its own leaf page: ~2.7 of the
// ~5 pages each delivery wrote to the WAL, and about half the commit's CPU. The table is therefore append-only
// (AUTOINCREMENT ids, never reused, indexed only by job and by age, both in arrival order) and lookups go through an
// in-memory index per connection: a 32-bit hash of the key → the ids of the rows with that hash. A hit is confirmed
// by reading the row by id and comparing the key, so a hash collision or a row deleted meanwhile never counts as a
// duplicate. The index catches up with every committed row (`id > last seen`, from this or any other connection)
// at the start of each write transaction, so it can never miss a committed key; keys claimed in the open
// transaction are looked up in that transaction's own map, and join the index only once it committed.
import type { Db } from './open.ts';

export interface DedupeBatch {
  /** The job that already holds any of these keys: committed, or claimed earlier in this transaction. */
  findAny(keys: readonly string[]): string | undefined;
  claim(keys: readonly string[], jobId: string, at: number): void;
  /** Call once the transaction COMMITTED: its claims join the index without being read back. */
  committed(): void;
}

export interface TriggerDedupeStore {
  /** Call first inside a write transaction (BEGIN IMMEDIATE): catches the index up with every committed key. */
  batch(): DedupeBatch;
  /**
   * The job holding any of these committed keys, outside a transaction (the cheap check before a delivery does any
   * work). Catching up here is safe: writers are serialised, so a row committed later always has a larger id.
   */
  peek(keys: readonly string[]): string | undefined;
  /** Builds the index now (server start), so the first delivery does not wait for it. */
  warm(): void;
  /** Rows that were deleted (retention): their index entries go. */
  forget(rows: readonly { id: number; key: string }[]): void;
  /** Keys in the in-memory index (tests, diagnostics). */
  indexed(): number;
}

// Maps hold at most 2^24 entries in V8: 16 shards keep a very busy server (tens of millions of keys) well inside.
const SHARDS = 16;

/** FNV-1a over the UTF-16 code units; the low 4 bits pick the shard, the next 28 are a small-integer map key. */
export function dedupeHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0;
}

export function createTriggerDedupeStore(db: Db): TriggerDedupeStore {
  // In chunks through all(): node:sqlite's iterate() cost ~3× as much per row when the index is built at start.
  const since = db.prepare('SELECT id, key FROM dedupe_keys WHERE id > ? ORDER BY id LIMIT 4096');
  since.setReturnArrays(true);
  const byId = db.prepare('SELECT key, job_id FROM dedupe_keys WHERE id = ?');
  const insert = db.prepare('INSERT INTO dedupe_keys (key, job_id, created_at) VALUES (?, ?, ?)');
  const shards = Array.from({ length: SHARDS }, () => new Map<number, number | number[]>());
  let seen = 0;
  let size = 0;

  function add(id: number, key: string): void {
    const h = dedupeHash(key);
    const shard = shards[h & (SHARDS - 1)]!;
    const slot = h >>> 4;
    const ids = shard.get(slot);
    if (ids === undefined) shard.set(slot, id);
    else if (typeof ids === 'number') shard.set(slot, [ids, id]);
    else ids.push(id);
    size++;
  }

  function remove(id: number, key: string): void {
    const h = dedupeHash(key);
    const shard = shards[h & (SHARDS - 1)]!;
    const slot = h >>> 4;
    const ids = shard.get(slot);
    if (ids === id) shard.delete(slot);
    else if (Array.isArray(ids) && ids.includes(id)) {
      const rest = ids.filter((x) => x !== id);
      shard.set(slot, rest.length === 1 ? rest[0]! : rest);
    } else return;
    size--;
  }

  function catchUp(): void {
    for (;;) {
      const rows = since.all(seen) as unknown as [number, string][];
      for (const row of rows) add(row[0], row[1]);
      if (rows.length > 0) seen = rows[rows.length - 1]![0];
      if (rows.length < 4096) return;
    }
  }

  /** The job holding exactly this key among the committed rows, confirming each hash hit by the row itself. */
  function committedHolder(key: string): string | undefined {
    const h = dedupeHash(key);
    const ids = shards[h & (SHARDS - 1)]!.get(h >>> 4);
    if (ids === undefined) return undefined;
    for (const id of typeof ids === 'number' ? [ids] : ids) {
      const row = byId.get(id) as { key: string; job_id: string } | undefined;
      if (row?.key === key) return row.job_id;
    }
    return undefined;
  }

  return {
    batch() {
      catchUp();
      const claimed = new Map<string, string>();
      const rows: [number, string][] = [];
      return {
        findAny(keys) {
          for (const key of keys) {
            const holder = claimed.get(key) ?? committedHolder(key);
            if (holder !== undefined) return holder;
          }
          return undefined;
        },
        claim(keys, jobId, at) {
          for (const key of new Set(keys)) {
            rows.push([Number(insert.run(key, jobId, at).lastInsertRowid), key]);
            claimed.set(key, jobId);
          }
        },
        // This connection held the write lock from catchUp() to COMMIT, so no other row was committed in between,
        // and an id skipped here (a rolled-back or deleted row) is never handed out again: nothing below the last
        // id is missed.
        committed() {
          for (const [id, key] of rows) add(id, key);
          if (rows.length > 0) seen = Math.max(seen, rows[rows.length - 1]![0]);
        },
      };
    },
    peek(keys) {
      catchUp();
      for (const key of keys) {
        const holder = committedHolder(key);
        if (holder !== undefined) return holder;
      }
      return undefined;
    },
    warm: catchUp,
    forget(rows) {
      for (const row of rows) if (row.id <= seen) remove(row.id, row.key);
    },
    indexed: () => size,
  };
}
