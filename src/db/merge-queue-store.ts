// merge_queue: runs waiting to be merged, in the order they were added; status queued → merged | failed.
import type { Db } from './open.ts';

export type MergeStatus = 'queued' | 'merged' | 'failed';

export interface MergeEntry {
  id: number;
  source: string;
  run: string;
  status: MergeStatus;
  detail: string | null;
  added_at: number;
  updated_at: number;
}

export function createMergeQueueStore(db: Db) {
  const cols = 'id, source, run, status, detail, added_at, updated_at';
  const addStmt = db.prepare(
    `INSERT INTO merge_queue (source, run, status, detail, added_at, updated_at) VALUES (?, ?, 'queued', NULL, ?, ?)
     ON CONFLICT (source, run) DO UPDATE SET status = 'queued', detail = NULL, added_at = excluded.added_at,
     updated_at = excluded.updated_at
     WHERE merge_queue.status = 'failed'
     RETURNING ${cols}`,
  );
  const getStmt = db.prepare(`SELECT ${cols} FROM merge_queue WHERE source = ? AND run = ?`);
  const listStmt = db.prepare(`SELECT ${cols} FROM merge_queue ORDER BY added_at, id`);
  const queuedStmt = db.prepare(`SELECT ${cols} FROM merge_queue WHERE status = 'queued' ORDER BY added_at, id`);
  const setStmt = db.prepare('UPDATE merge_queue SET status = ?, detail = ?, updated_at = ? WHERE id = ?');
  return {
    /** Undefined when the run is already queued. */
    add(source: string, run: string, at: number) {
      return addStmt.get(source, run, at, at) as MergeEntry | undefined;
    },
    get(source: string, run: string) {
      return getStmt.get(source, run) as MergeEntry | undefined;
    },
    /** Oldest first, as queued() for the entries still waiting. */
    list() {
      return listStmt.all() as unknown as MergeEntry[];
    },
    queued() {
      return queuedStmt.all() as unknown as MergeEntry[];
    },
    setStatus(id: number, status: MergeStatus, detail: string | null, at: number): void {
      setStmt.run(status, detail, at, id);
    },
  };
}
