// One runs-list page as the bytes of its body, read from the runs' stored Run JSON texts (control migration 3): the
// only way the Control Plane builds a list page (the response cache in src/control/runs-page-cache.ts reuses what
// this made). A run without its text yet (a DB from before migration 3, or a row a plain-SQL UPDATE touched, which
// drops the text) gets it written here first, so a page never needs a second way of being made.
import type { StatementSync } from 'node:sqlite';
import type { Db } from './open.ts';
import type { PageFrame, RunFilter } from './run-types.ts';
import { buildWhere, ORDER } from './runs-where.ts';
import { LIMIT_PARAM } from './limit-param.ts';
import { transaction } from './open.ts';
import { runTupleJson } from './run-json-text.ts';
import { PUBLIC_RUN_COLUMNS } from './run-types.ts';
import { FailedError } from '../errors.ts';

/** Reads a page: frame(next).open + the runs' texts joined by ',' + frame(next).close. */
export type RunsPageQuery = (filter: RunFilter, frame: PageFrame) => Uint8Array;

/** A page still lacked a text after its runs' texts were written in the same transaction: a bug, never input. */
export class RunsPageTextMissingError extends FailedError {
  constructor() {
    super('a run on this runs-list page has no stored Run JSON text');
  }
}

export function createRunsPageQuery(db: Db): RunsPageQuery {
  const { readPage, fillThenRead } = createPageReader(db);
  return (filter, frame) => readPage(filter, frame) ?? transaction(db, () => fillThenRead(filter, frame));
}

function createPageReader(db: Db) {
  const beginRead = db.prepare('BEGIN');
  const commitRead = db.prepare('COMMIT');
  const setJson = db.prepare('UPDATE runs SET json = ? WHERE rowid = ?');
  // One statement per filter shape (which filter fields are present), made on first use.
  const statements = new Map<string, StatementSync>();

  function prepared(sql: string): StatementSync {
    let stmt = statements.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      stmt.setReturnArrays(true);
      statements.set(sql, stmt);
    }
    return stmt;
  }

  /** The page, or undefined when a run on it has no text; the caller holds a transaction or this opens a read. */
  function read(filter: RunFilter, frame: PageFrame): Uint8Array | undefined {
    const { clause, args } = buildWhere(filter);
    // The page's last key and whether one more row exists: two index entries past limit − 1.
    const next = prepared(`SELECT started_at, source, run FROM runs ${clause}${ORDER} LIMIT 2 OFFSET ?`);
    // group_concat over the ordered co-routine: SQLite feeds the aggregate the sub-select's rows in its ORDER BY
    // order (an ORDER BY inside group_concat would sort ~28 KB again, +70 % per page);
    // test/unit/runs-page-json.test.ts compares pages byte for byte with JSON.stringify of each run. The frame is
    // joined inside SQLite too and CAST AS BLOB: one buffer per page reaches JS, and goes to the socket undecoded.
    const page = prepared(
      `SELECT CAST(?1 || coalesce(group_concat(json, ','), '') || ?2 AS BLOB), count(*), count(json)
       FROM (SELECT json FROM runs ${clause}${ORDER} ${LIMIT_PARAM})`,
    );
    const keys = next.all(...args, filter.limit - 1) as unknown as Array<[number, string, string]>;
    const last = keys.length === 2 ? keys[0]! : undefined;
    const { open, close } = frame(last ? { started_at: last[0], source: last[1], run: last[2] } : null);
    const row = page.get(open, close, ...args, filter.limit) as unknown as [Uint8Array, number, number];
    const [body, count, withJson] = row;
    return withJson < count ? undefined : body;
  }

  /** Writes the texts of the page's runs that lack one, from their columns (run-json-text.ts). */
  function fill(filter: RunFilter): void {
    const { clause, args } = buildWhere(filter);
    const missing = prepared(
      `SELECT rowid, ${PUBLIC_RUN_COLUMNS.join(', ')} FROM runs
       WHERE rowid IN (SELECT rowid FROM runs ${clause}${ORDER} ${LIMIT_PARAM}) AND json IS NULL`,
    );
    for (const row of missing.all(...args, filter.limit) as unknown as unknown[][]) {
      setJson.run(runTupleJson(row.slice(1)), row[0] as number);
    }
  }

  /** The page read in one snapshot, or undefined when a run on it lacks its text. */
  function readPage(filter: RunFilter, frame: PageFrame): Uint8Array | undefined {
    // One read snapshot for the page and its cursor, so a commit by another connection can't slip between them.
    if (db.isTransaction) return read(filter, frame) ?? fillThenRead(filter, frame);
    beginRead.run();
    try {
      return read(filter, frame);
    } finally {
      commitRead.run();
    }
  }

  function fillThenRead(filter: RunFilter, frame: PageFrame): Uint8Array {
    fill(filter);
    const body = read(filter, frame);
    if (!body) throw new RunsPageTextMissingError();
    return body;
  }

  return { readPage, fillThenRead };
}

