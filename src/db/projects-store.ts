// projects: the repositories the operator registered (POST /v1/import). With the `repos` setting they are the only
// places the Control Plane starts a process in. Paths are stored as real paths (symlinks resolved).
import type { Db } from './open.ts';

export interface Project {
  path: string;
  registered_at: number;
}

export interface ProjectsStore {
  /** True when the path was new. */
  add(path: string, now: number): boolean;
  /** Whether that exact real path is registered. */
  has(path: string): boolean;
  /** Oldest first. */
  list(): Project[];
}

export function createProjectsStore(db: Db): ProjectsStore {
  const addStmt = db.prepare('INSERT INTO projects (path, registered_at) VALUES (?, ?) ON CONFLICT (path) DO NOTHING');
  const hasStmt = db.prepare('SELECT 1 AS found FROM projects WHERE path = ?');
  const listStmt = db.prepare('SELECT path, registered_at FROM projects ORDER BY registered_at, path');
  return {
    add(path, now) {
      return Number(addStmt.run(path, now).changes) > 0;
    },
    has(path) {
      return hasStmt.get(path) !== undefined;
    },
    list() {
      return listStmt.all() as unknown as Project[];
    },
  };
}
