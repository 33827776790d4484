// When may a response built from the runs table be reused? The runs list's response cache asks this before every
// hit (src/control/runs-page-cache.ts), so it must be cheap and must never say "unchanged" after a change.
import type { Db } from './open.ts';

export interface RunsChangeStamp {
  /** Called before every write the runs store makes, whether or not it changes a row. */
  bump(): void;
  /**
   * Equal stamps mean no run changed in between. Covers the runs store's writes (a generation counter), any other
   * write on this connection (total_changes()) and commits by other connections or processes (PRAGMA
   * data_version). null while a transaction is open: uncommitted rows are never cached.
   */
  read(): string | null;
}

export function createRunsChangeStamp(db: Db): RunsChangeStamp {
  // Two plain statements: the pragma_data_version table-valued function cost more (virtual-table setup on every
  // call) than both of these together, and a cached page pays for the stamp on every request.
  const dataVersionStmt = db.prepare('PRAGMA data_version');
  dataVersionStmt.setReturnArrays(true);
  const totalChangesStmt = db.prepare('SELECT total_changes()');
  totalChangesStmt.setReturnArrays(true);
  // A stale cache hit is the one thing that must never happen; an extra miss costs one query.
  let generation = 0;
  return {
    bump() {
      generation += 1;
    },
    read() {
      if (db.isTransaction) return null;
      const [dataVersion] = dataVersionStmt.get() as unknown as [number];
      const [changes] = totalChangesStmt.get() as unknown as [number];
      return `${generation}.${changes}.${dataVersion}`;
    },
  };
}
