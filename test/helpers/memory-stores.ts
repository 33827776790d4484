// A fresh in-memory Control Plane DB and its stores for one describe block, closed in that block's after().
import { after } from 'node:test';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { createControlStores, type ControlStores } from '../../src/db/control-stores.ts';

/** Call inside describe(): the DB opens now and closes after the block's last test. */
export function memoryControlStores(): { db: Db; stores: ControlStores } {
  const db = openDatabase(':memory:', controlMigrations);
  const stores = createControlStores(db);
  after(() => db.close());
  return { db, stores };
}
