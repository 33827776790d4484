// Dedupe keys, claimed in the same transaction as their job: an append-only table (one row per claim, its keys as a
// JSON array) found through an in-memory index of key hashes → row ids, each hit confirmed by its row; the index
// catches up with rows other connections committed (docs/trigger.md "How keys are looked up"; docs/bench.md).
import { LIMIT_PARAM, type Db } from './open.ts';

// A Map holds at most 2^24 entries in V8: 16 shards keep a server with tens of millions of live keys inside that.
const SHARDS = 16;

/** FNV-1a over the UTF-16 code units: the low 4 bits pick the shard, the rest is the key within it. */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0;
}

type Row = { keys: string; job_id: string };

/** A row's keys: a JSON array of strings, written only by `claim` and migration 12. */
function keysOf(text: string): string[] {
  return JSON.parse(text) as string[];
}

export function createTriggerDedupeStore(db: Db) {
  // In chunks through all(): iterate() cost ~3× as much per row when the index is built at start.
  const since = db.prepare('SELECT id, keys FROM dedupe_keys WHERE id > ? ORDER BY id LIMIT 4096');
  since.setReturnArrays(true);
  const byId = db.prepare('SELECT keys, job_id FROM dedupe_keys WHERE id = ?');
  const add = db.prepare('INSERT INTO dedupe_keys (keys, job_id, created_at) VALUES (?, ?, ?)');
  const expired = db.prepare(`DELETE FROM dedupe_keys WHERE id IN
    (SELECT id FROM dedupe_keys WHERE created_at < ? ORDER BY created_at ${LIMIT_PARAM}) RETURNING id, keys`);
  expired.setReturnArrays(true);
  const shards = Array.from({ length: SHARDS }, () => new Map<number, number | number[]>());
  // Every committed row up to here is indexed (set from committed rows only: a rolled-back id is read again).
  let seen = 0;

  function index(id: number, key: string, h = hashOf(key)): void {
    const shard = shards[h & (SHARDS - 1)]!;
    const ids = shard.get(h >>> 4);
    if (ids === undefined) shard.set(h >>> 4, id);
    else if (typeof ids === 'number') {
      if (ids !== id) shard.set(h >>> 4, [ids, id]);
    } else if (!ids.includes(id)) ids.push(id);
  }

  function unindex(id: number, key: string): void {
    const h = hashOf(key);
    const shard = shards[h & (SHARDS - 1)]!;
    const ids = shard.get(h >>> 4);
    if (ids === id) shard.delete(h >>> 4);
    else if (Array.isArray(ids)) {
      const rest = ids.filter((x) => x !== id);
      shard.set(h >>> 4, rest.length === 1 ? rest[0]! : rest);
    }
  }

  // This connection's last claim in a write transaction: its row there at the next catch-up means it committed, and
  // the rows before it since that transaction's catch-up were its own, indexed already (it held the write lock).
  let claimed: { id: number; keys: string; jobId: string } | null = null;

  function catchUp(): void {
    if (claimed !== null) {
      const row = byId.get(claimed.id) as Row | undefined;
      if (row?.keys === claimed.keys && row.job_id === claimed.jobId) seen = Math.max(seen, claimed.id);
      claimed = null;
    }
    for (;;) {
      const rows = since.all(seen) as unknown as [number, string][];
      for (const [id, keys] of rows) for (const key of keysOf(keys)) index(id, key);
      if (rows.length > 0) seen = rows[rows.length - 1]![0];
      if (rows.length < 4096) return;
    }
  }

  /** The job whose row holds exactly this key, each hash hit confirmed by the row itself. */
  function holderOf(key: string, h = hashOf(key)): string | undefined {
    const ids = shards[h & (SHARDS - 1)]!.get(h >>> 4);
    if (ids === undefined) return undefined;
    for (const id of typeof ids === 'number' ? [ids] : ids) {
      const row = byId.get(id) as Row | undefined;
      if (row !== undefined && keysOf(row.keys).includes(key)) return row.job_id;
    }
    return undefined;
  }

  catchUp();
  return {
    /** Call first in every write transaction that claims keys: reads the keys other connections committed. */
    catchUp,
    /** The job that holds any of these keys: committed, or claimed earlier in the open transaction. */
    holder(keys: readonly string[]): string | undefined {
      // Inside a transaction the caller caught up first; reading here could index its own uncommitted rows.
      if (!db.isTransaction) catchUp();
      for (const key of keys) {
        const holder = holderOf(key);
        if (holder !== undefined) return holder;
      }
      return undefined;
    },
    /** Claims the keys (one at least, none of them the job's yet), or returns the job holding one and claims none. */
    claim(keys: readonly string[], jobId: string, at: number): string | undefined {
      const fresh: string[] = [];
      const hashes: number[] = [];
      for (const key of keys) {
        if (fresh.includes(key)) continue;
        const h = hashOf(key);
        const holder = holderOf(key, h);
        if (holder !== undefined) return holder;
        fresh.push(key);
        hashes.push(h);
      }
      const text = JSON.stringify(fresh);
      const id = Number(add.run(text, jobId, at).lastInsertRowid);
      for (let i = 0; i < fresh.length; i++) index(id, fresh[i]!, hashes[i]);
      if (db.isTransaction) claimed = { id, keys: text, jobId };
      return undefined;
    },
    /** Deletes up to `limit` claims made before `before` and their index entries; returns how many keys. */
    prune(before: number, limit: number): number {
      const rows = expired.all(before, limit) as unknown as [number, string][];
      let keys = 0;
      for (const [id, text] of rows) {
        const claimedKeys = keysOf(text);
        for (const key of claimedKeys) unindex(id, key);
        keys += claimedKeys.length;
      }
      return keys;
    },
  };
}
