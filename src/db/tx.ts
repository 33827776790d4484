// Runs fn in a transaction unless one is already open, so store methods compose inside a caller's transaction.
import { transaction, type Db } from './open.ts';

export function inTransaction<T>(db: Db, fn: () => T): T {
  return db.isTransaction ? fn() : transaction(db, fn);
}
