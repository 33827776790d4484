// Trigger DB files in temp dirs for one test file; call at its top level so the after() hook belongs to the file.
import { after } from 'node:test';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { tempDir } from './helpers.ts';

export interface TempDbs {
  /** A fresh migrated trigger.db in its own temp dir. */
  open(): { db: Db; path: string };
  /** Anything else to close or remove with them. */
  dirs: string[];
  dbs: Db[];
}

/** Every DB is closed (if still open) and every dir removed in the file's after(). */
export function tempTriggerDbs(prefix: string): TempDbs {
  const dirs: string[] = [];
  const dbs: Db[] = [];
  after(() => {
    for (const db of dbs) if (db.isOpen) db.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    dirs,
    dbs,
    open() {
      const dir = tempDir(prefix);
      dirs.push(dir);
      const path = join(dir, 'trigger.db');
      const db = openDatabase(path, triggerMigrations);
      dbs.push(db);
      return { db, path };
    },
  };
}
