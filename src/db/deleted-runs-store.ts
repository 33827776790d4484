// deleted_runs: runs an operator deleted (DELETE /v1/runs/…), so a runner that ships one again (`svc ship`, a late
// flush) does not bring it back. An explicit POST /v1/import of its project does, and forgets it.
import type { Db } from './open.ts';

export interface DeletedRunsStore {
  add(source: string, run: string, now: number): void;
  /** Whether ingest must drop that run. */
  has(source: string, run: string): boolean;
  /** An import brought it back. */
  forget(source: string, run: string): void;
}

export function createDeletedRunsStore(db: Db): DeletedRunsStore {
  const addStmt = db.prepare(
    `INSERT INTO deleted_runs (source, run, deleted_at) VALUES (?, ?, ?)
     ON CONFLICT (source, run) DO UPDATE SET deleted_at = excluded.deleted_at`,
  );
  const hasStmt = db.prepare('SELECT 1 AS found FROM deleted_runs WHERE source = ? AND run = ?');
  const forgetStmt = db.prepare('DELETE FROM deleted_runs WHERE source = ? AND run = ?');
  return {
    add(source, run, now) {
      addStmt.run(source, run, now);
    },
    has(source, run) {
      return hasStmt.get(source, run) !== undefined;
    },
    forget(source, run) {
      forgetStmt.run(source, run);
    },
  };
}
