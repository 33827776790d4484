// start_requests: makes POST /v1/start idempotent by request_id (same id + same body → same run; different body →
// conflict).
import type { Db } from './open.ts';

export interface StartRequest {
  request_id: string;
  body_sha256: string;
  source: string;
  run: string;
  created_at: number;
}

export interface StartRequestsStore {
  get(requestId: string): StartRequest | undefined;
  /** False when the id was already taken. */
  add(row: StartRequest): boolean;
  /** Forgets an id (its run is gone, so the id may start a new run). */
  remove(requestId: string): boolean;
}

export function createStartRequestsStore(db: Db): StartRequestsStore {
  const getStmt = db.prepare(
    'SELECT request_id, body_sha256, source, run, created_at FROM start_requests WHERE request_id = ?',
  );
  const addStmt = db.prepare(
    'INSERT INTO start_requests (request_id, body_sha256, source, run, created_at) VALUES (?, ?, ?, ?, ?) ' +
      'ON CONFLICT (request_id) DO NOTHING',
  );
  const removeStmt = db.prepare('DELETE FROM start_requests WHERE request_id = ?');
  return {
    get(requestId) {
      return getStmt.get(requestId) as StartRequest | undefined;
    },
    add(row) {
      return Number(addStmt.run(row.request_id, row.body_sha256, row.source, row.run, row.created_at).changes) > 0;
    },
    remove(requestId) {
      return Number(removeStmt.run(requestId).changes) > 0;
    },
  };
}
