// Dedupe keys, claimed in the same transaction as their job: an append-only table (one row per claim, its keys as a
// JSON array) found through an in-memory index of key hashes → row ids, each hit confirmed by its row; the index
// catches up with rows other connections committed (docs/trigger.md "How keys are looked up"; docs/bench.md).
import { LIMIT_PARAM, type Db } from './open.ts';

/** FNV-1a over the UTF-16 code units, never 0 (a slot's 0 means never used; every hit is confirmed by its row). */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0 || 1;
}

/** Slots filled (removed ones included) past which the table is rebuilt: 3/4, as `rebuild` counts. */
const MAX_LOAD = 0.75;
const MIN_SLOTS = 1024;

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
  // Of the oldest claims by row id (ids grow with time: no index of the times to keep up per claim), those expired.
  // A claim the clock dated later than those after it (stepped back, a slow writer) stays in this window unexpired.
  const window = db.prepare(`SELECT count(*), max(id) FROM (SELECT id FROM dedupe_keys ORDER BY id ${LIMIT_PARAM})`);
  window.setReturnArrays(true);
  const expired = db.prepare('DELETE FROM dedupe_keys WHERE id <= ? AND created_at < ? RETURNING id, keys');
  expired.setReturnArrays(true);
  // Every committed row up to here is indexed (set from committed rows only: a rolled-back id is read again).
  let seen = 0;

  // The index: each claimed key's hash and its row id in a slot of two typed arrays (open addressing, probed linearly
  // from the hash's slot), not Maps: a look-up of a new key reads a few adjacent hashes, and the garbage collector has
  // nothing to walk (docs/bench.md). `hashes[i]` 0: never used; `ids[i]` 0: removed (row ids start at 1).
  let hashes = new Uint32Array(MIN_SLOTS);
  let ids = new Float64Array(MIN_SLOTS);
  let shift = 32 - Math.log2(MIN_SLOTS);
  let filled = 0;
  let live = 0;

  /** The slot probing for `h` starts at (Fibonacci hashing: the hash's bits spread over the table's). */
  const firstSlot = (h: number): number => Math.imul(h, 0x9e3779b1) >>> shift;

  function put(h: number, id: number): void {
    const mask = hashes.length - 1;
    let i = firstSlot(h);
    while (hashes[i] !== 0) i = (i + 1) & mask;
    hashes[i] = h;
    ids[i] = id;
    filled++;
    live++;
  }

  /** A table of the live entries alone, sized so they fill at most half of MAX_LOAD of it. */
  function rebuild(): void {
    const [oldHashes, oldIds] = [hashes, ids];
    let size = MIN_SLOTS;
    while (live > size * (MAX_LOAD / 2)) size *= 2;
    hashes = new Uint32Array(size);
    ids = new Float64Array(size);
    shift = 32 - Math.log2(size);
    filled = 0;
    live = 0;
    for (let i = 0; i < oldHashes.length; i++) if (oldIds[i] !== 0) put(oldHashes[i]!, oldIds[i]!);
  }

  function index(id: number, key: string, h = hashOf(key)): void {
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) if (hashes[i] === h && ids[i] === id) return;
    if (filled + 1 > hashes.length * MAX_LOAD) rebuild();
    put(h, id);
  }

  function unindex(id: number, key: string): void {
    const h = hashOf(key);
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) {
      if (hashes[i] === h && ids[i] === id) {
        ids[i] = 0;
        live--;
      }
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
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) {
      if (hashes[i] !== h || ids[i] === 0) continue;
      const row = byId.get(ids[i]!) as Row | undefined;
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
    /**
     * Of the oldest `limit` claims (`scanned`, fewer once the window reaches the newest), deletes those made before
     * `before` (`claims`) and their index entries (`keys`). An expired claim may lie past a full window.
     */
    prune(before: number, limit: number): { scanned: number; claims: number; keys: number } {
      const [scanned, last] = window.get(limit) as unknown as [number, number | null];
      if (last === null) return { scanned: 0, claims: 0, keys: 0 };
      const rows = expired.all(last, before) as unknown as [number, string][];
      let keys = 0;
      for (const [id, text] of rows) {
        const claimedKeys = keysOf(text);
        for (const key of claimedKeys) unindex(id, key);
        keys += claimedKeys.length;
      }
      return { scanned, claims: rows.length, keys };
    },
  };
}
