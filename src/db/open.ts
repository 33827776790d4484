// Opens a SQLite file with the pragmas every connection needs (STYLE habit 5) and applies migrations.
import { DatabaseSync } from 'node:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { migrate, type Migration } from './migrate.ts';

export type Db = DatabaseSync;

/** Without migrations: a second connection to a DB its owner already migrated (the WAL checkpoint thread). */
export function openConnection(path: string): Db {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec('PRAGMA temp_store = MEMORY');
  return db;
}

export function openDatabase(path: string, migrations: readonly Migration[]): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = openConnection(path);
  try {
    migrate(db, migrations);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/** Runs fn inside BEGIN IMMEDIATE … COMMIT; fn must be synchronous (no await inside a transaction). */
export function transaction<T>(db: Db, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = fn();
    db.exec('COMMIT');
    return result;
  } catch (err) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw err;
  }
}

/** transaction() unless one is already open, so store methods compose inside a caller's transaction. */
export function inTransaction<T>(db: Db, fn: () => T): T {
  return db.isTransaction ? fn() : transaction(db, fn);
}
