// Trigger DB files in temp dirs for one test file; call at its top level so the after() hook belongs to the file.
import { after } from 'node:test';
import { join } from 'node:path';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { tempDir } from './helpers.ts';

export interface TempDbs {
  /** A fresh migrated trigger.db in its own temp dir. */
  open(): { db: Db; path: string };
  dbs: Db[];
}

/** Every DB is closed (if still open) in the file's after(); tempDir removes their dirs when the process exits. */
export function tempTriggerDbs(prefix: string): TempDbs {
  const dbs: Db[] = [];
  after(() => {
    for (const db of dbs) if (db.isOpen) db.close();
  });
  return {
    dbs,
    open() {
      const dir = tempDir(prefix);
      const path = join(dir, 'trigger.db');
      const db = openDatabase(path, triggerMigrations);
      dbs.push(db);
      return { db, path };
    },
  };
}
