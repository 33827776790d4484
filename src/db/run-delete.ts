// Deleting a run takes everything that hangs off it: its events, artifacts, control and start requests. An active
// run (it still owns a process or a worktree) is kept.
import type { Db } from './open.ts';
import { inTransaction } from './tx.ts';
import { ACTIVE_STATUSES } from '../run-json.ts';
import type { DeleteOutcome } from './run-types.ts';

const ACTIVE: ReadonlySet<string> = new Set(ACTIVE_STATUSES);

export type RunDelete = (source: string, run: string) => DeleteOutcome;

export function createRunDelete(db: Db): RunDelete {
  const statusStmt = db.prepare('SELECT status FROM runs WHERE source = ? AND run = ?');
  // A start request_id whose run is gone may be used again (POST /v1/start answers a new run for it), so its
  // start request goes with it.
  const cascade = ['events', 'artifacts', 'control_requests', 'start_requests', 'runs'].map((table) =>
    db.prepare(`DELETE FROM ${table} WHERE source = ? AND run = ?`));
  return (source, run) =>
    inTransaction(db, () => {
      const row = statusStmt.get(source, run) as { status: string } | undefined;
      if (!row) return 'not_found';
      if (ACTIVE.has(row.status)) return 'active';
      for (const stmt of cascade) stmt.run(source, run);
      return 'deleted';
    });
}
