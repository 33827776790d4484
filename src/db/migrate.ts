// Append-only migrations keyed by PRAGMA user_version; a database newer than the code is refused.
import { RefusedError } from '../errors.ts';
import type { DatabaseSync } from 'node:sqlite';

export type Migration = string;

export class DatabaseTooNewError extends RefusedError {
  constructor(found: number, known: number) {
    super(`Database schema version ${found} is newer than this svc understands (${known}); upgrade svc`);
  }
}

export function userVersion(db: DatabaseSync): number {
  const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
  return row.user_version;
}

export function migrate(db: DatabaseSync, migrations: readonly Migration[]): void {
  const current = userVersion(db);
  if (current > migrations.length) throw new DatabaseTooNewError(current, migrations.length);
  if (current === migrations.length) return;
  db.exec('BEGIN IMMEDIATE');
  try {
    // Re-read inside the lock: another process may have migrated while we waited.
    const locked = userVersion(db);
    if (locked > migrations.length) throw new DatabaseTooNewError(locked, migrations.length);
    for (let v = locked; v < migrations.length; v++) {
      db.exec(migrations[v]!);
      db.exec(`PRAGMA user_version = ${v + 1}`);
    }
    db.exec('COMMIT');
  } catch (err) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw err;
  }
}
