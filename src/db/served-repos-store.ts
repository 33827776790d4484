// served_repos: the repositories each trigger server serves, by the source it reports as. A report
// replaces its source's list whole, so an entry removed from the server's file is gone after its next start.
import type { Db } from './open.ts';

export interface ServedRepoRow {
  source: string;
  name: string;
  reported_at: number;
}

export interface ServedReposStore {
  /** The source's list becomes exactly `names`. */
  replace(source: string, names: readonly string[], now: number): void;
  /** Every (source, name), by name then source. */
  list(): ServedRepoRow[];
}

export function createServedReposStore(db: Db): ServedReposStore {
  const clearStmt = db.prepare('DELETE FROM served_repos WHERE source = ?');
  const addStmt = db.prepare(
    'INSERT INTO served_repos (source, name, reported_at) VALUES (?, ?, ?) ON CONFLICT (source, name) DO NOTHING',
  );
  const listStmt = db.prepare('SELECT source, name, reported_at FROM served_repos ORDER BY name, source');
  return {
    // Called inside the ingest batch's transaction (ingest-apply.ts): all or nothing with the rest of the batch.
    replace(source, names, now) {
      clearStmt.run(source);
      for (const name of names) addStmt.run(source, name, now);
    },
    list() {
      return listStmt.all() as unknown as ServedRepoRow[];
    },
  };
}
