// Opens a SQLite file with the pragmas every connection needs (STYLE habit 5) and applies its append-only migrations,
// keyed by PRAGMA user_version; a database newer than the code is refused.
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, FailedError, isDatabaseBusy, isDiskError, isDiskIoError, RefusedError } from '../errors.ts';

export type Db = DatabaseSync;

export class DatabaseTooNewError extends RefusedError {
  constructor(found: number, known: number) {
    super(`Database schema version ${found} is newer than this svc understands (${known}); upgrade svc`);
  }
}

export function userVersion(db: Db): number {
  return (db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version;
}

/** node:sqlite's defensive mode, where Node has it (absent in 24.9, the Node svc pins; newer ones have it). */
type Defensive = { enableDefensive?: (on: boolean) => void };

export function migrate(db: Db, migrations: readonly string[]): void {
  const current = userVersion(db);
  if (current > migrations.length) throw new DatabaseTooNewError(current, migrations.length);
  if (current === migrations.length) return;
  // Defensive mode refuses PRAGMA writable_schema, with which trigger migration 15 edits a table's checks in place;
  // off for the migrations alone, on again after: nothing else needs it.
  const defensive = (on: boolean): void => (db as Db & Defensive).enableDefensive?.(on);
  defensive(false);
  try {
    transaction(db, () => {
      // Again inside the lock: another process may have migrated meanwhile.
      const locked = userVersion(db);
      if (locked > migrations.length) throw new DatabaseTooNewError(locked, migrations.length);
      for (let v = locked; v < migrations.length; v++) {
        db.exec(migrations[v]!);
        db.exec(`PRAGMA user_version = ${v + 1}`);
      }
    });
  } finally {
    // On after, whatever it was before (Node has no getter): nothing svc does needs it off.
    defensive(true);
  }
}

/**
 * The longest one statement waits for the write lock another process holds (an operator's sqlite3 shell, a backup, a
 * second server on the file): node:sqlite waits synchronously, so it is also the longest a busy database stalls a
 * server's event loop. Past it the write fails as busy: a request is answered 503, background work tries again later.
 */
export const BUSY_TIMEOUT_MS = 100;
/** How long, after a statement met the lock, statements take it only if it is free (no wait: `busyMet`). */
const BUSY_BACKOFF_MS = 1_000;
/** Before a server serves, its migrations and other start-up writes may wait for the lock as long as this. */
const MIGRATE_BUSY_TIMEOUT_MS = 5_000;

/** Without migrations: a second connection to a DB its owner already migrated (the WAL checkpoint thread). */
export function openConnection(path: string): Db {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  db.exec('PRAGMA temp_store = MEMORY');
  return db;
}

export function openDatabase(path: string, migrations: readonly string[]): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let db: Db;
  try {
    db = openConnection(path);
  } catch (err) {
    // node:sqlite names no file ("file is not a database"): say which. Exit 1, not 2: a locked, unreadable or
    // corrupt file at a right path fails the same way, so the path is not known to be the operator's mistake.
    throw new FailedError(`Cannot open the database ${path}: ${errorMessage(err)}`, { cause: err });
  }
  try {
    beforeServing(db, () => migrate(db, migrations));
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/** Runs `fn`, start-up work done before a server serves (nothing stalls yet), waiting as migrations do for the lock. */
export function beforeServing<T>(db: Db, fn: () => T): T {
  db.exec(`PRAGMA busy_timeout = ${MIGRATE_BUSY_TIMEOUT_MS}`);
  try {
    return fn();
  } finally {
    if (db.isOpen) db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

const backingOff = new WeakSet<Db>();

/**
 * Called when a statement of `db` failed as busy: for BUSY_BACKOFF_MS its statements no longer wait (each takes the
 * lock if it is free, else fails at once), so a lock held for seconds costs one BUSY_TIMEOUT_MS stall a second, not
 * one per request.
 */
export function busyMet(db: Db): void {
  if (backingOff.has(db) || !db.isOpen) return;
  backingOff.add(db);
  db.exec('PRAGMA busy_timeout = 0');
  setTimeout(() => {
    backingOff.delete(db);
    if (db.isOpen) db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }, BUSY_BACKOFF_MS).unref();
}

/** How often a write the disk failed (isDiskIoError: a read or write) is tried before it is thrown (a failing disk). */
const IOERR_TRIES = 5;
/** How soon background work tries again a write the database refused for now. */
const WRITE_RETRY_MS = 1_000;

/**
 * Whether `db` refused a write it may take later: busy (then its statements back off for a second: busyMet), a full
 * disk, a disk's failed read or write (isDiskError).
 */
export function refusedForNow(db: Db, err: unknown): boolean {
  if (!isDatabaseBusy(err)) return isDiskError(err);
  busyMet(db);
  return true;
}

/**
 * Does `write`, again each second while `db` refuses it for now (refusedForNow; a disk's failed read or write only
 * IOERR_TRIES times), telling `refused` of each refusal; false if `signal` aborts first (shutdown). Any other error is
 * thrown.
 */
export async function untilWritten(
  db: Db, write: () => void, signal: AbortSignal, refused: (err: unknown) => void,
): Promise<boolean> {
  for (let failedDisk = 0; ;) {
    try {
      write();
      return true;
    } catch (err) {
      if (!refusedForNow(db, err)) throw err;
      if (isDiskIoError(err) && ++failedDisk >= IOERR_TRIES) throw err;
      refused(err);
    }
    if (signal.aborted) return false;
    await sleep(WRITE_RETRY_MS, undefined, { signal }).catch(() => {});
  }
}

// A request's write the lock refused is tried again, without blocking the server, until this many tries have failed
// (about two seconds): a brief lock is ridden out; past it the request is answered 503 with Retry-After.
const BUSY_TRIES = 20;
export const BUSY_RETRY_MS = 100;

/** Whether a request's write that failed with `err` on its `tries`th try is tried again in BUSY_RETRY_MS: the lock
 * refused it (busyMet) and fewer than `most` tries failed. */
export function ridesOut(db: Db, err: unknown, tries: number, most = BUSY_TRIES): boolean {
  if (!isDatabaseBusy(err)) return false;
  busyMet(db);
  return tries < most;
}

/** Does `write` for a request, riding out a brief lock (ridesOut); any other error, or a longer lock, is thrown. */
export async function ridingOut(db: Db, write: () => void): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      return write();
    } catch (err) {
      if (!ridesOut(db, err, tries)) throw err;
    }
    await sleep(BUSY_RETRY_MS);
  }
}

// SQLite re-plans a bare `LIMIT ?` each time node:sqlite binds it; a CAST hides the value from the planner
// (docs/bench.md; test/unit/limit-param.test.ts).
export const LIMIT_PARAM = 'LIMIT CAST(? AS INTEGER)';

/**
 * One prepared statement per SQL text, for queries built per filter shape; `arrays`: rows as arrays. Unbounded: the
 * SQL must come from a finite set of shapes, never carry a request's values (those are bound).
 */
export function statementCache(db: Db, arrays = false): (sql: string) => StatementSync {
  const cache = new Map<string, StatementSync>();
  return (sql) => {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      stmt.setReturnArrays(arrays);
      cache.set(sql, stmt);
    }
    return stmt;
  };
}

/**
 * Runs fn inside BEGIN IMMEDIATE … COMMIT, or inside the caller's transaction when one is open, so store methods
 * compose; fn must be synchronous (no await inside a transaction).
 */
export function transaction<T>(db: Db, fn: () => T): T {
  if (db.isTransaction) return fn();
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
