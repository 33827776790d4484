// One runs-list page as the bytes of its body, read from the runs' stored Run JSON texts (control migration 3).
// Runs on the Control Plane's connection (runs store) and on the list's read thread (src/control/runs-page-worker.ts)
// with that thread's own connection: the same code either way, so both produce the same bytes.
import type { StatementSync } from 'node:sqlite';
import type { Db } from './open.ts';
import type { PageFrame, RunFilter } from './run-types.ts';
import { buildWhere, ORDER } from './runs-where.ts';
import { LIMIT_PARAM } from './limit-param.ts';

/** Reads a page: frame(next).open + the runs' texts joined by ',' + frame(next).close; undefined when a run on it has
 * no stored text yet (the caller then builds the page from the columns). */
export type RunsPageQuery = (filter: RunFilter, frame: PageFrame) => Uint8Array | undefined;

export function createRunsPageQuery(db: Db): RunsPageQuery {
  const beginRead = db.prepare('BEGIN');
  const commitRead = db.prepare('COMMIT');
  // One statement per filter shape (which filter fields are present), made on first use.
  const pageCache = new Map<string, StatementSync>();
  const nextCache = new Map<string, StatementSync>();

  function prepared(cache: Map<string, StatementSync>, sql: string): StatementSync {
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      stmt.setReturnArrays(true);
      cache.set(sql, stmt);
    }
    return stmt;
  }

  return (filter, frame) => {
    const { clause, args } = buildWhere(filter);
    // The page's last key and whether one more row exists: two index entries past limit − 1.
    const next = prepared(nextCache, `SELECT started_at, source, run FROM runs ${clause}${ORDER} LIMIT 2 OFFSET ?`);
    // group_concat over the ordered co-routine: SQLite feeds the aggregate the sub-select's rows in its ORDER BY order
    // (an ORDER BY inside group_concat would sort ~28 KB again, +70 % per page); test/unit/runs-page-json.test.ts
    // compares pages byte for byte with the per-row path. The frame is joined inside SQLite too and CAST AS BLOB:
    // one buffer per page reaches JS, and goes to the socket undecoded.
    const page = prepared(pageCache,
      `SELECT CAST(?1 || coalesce(group_concat(json, ','), '') || ?2 AS BLOB), count(*), count(json)
       FROM (SELECT json FROM runs ${clause}${ORDER} ${LIMIT_PARAM})`);
    // One read snapshot for both, so a commit by another connection can't slip between the page and its cursor.
    const own = !db.isTransaction;
    if (own) beginRead.run();
    try {
      const keys = next.all(...args, filter.limit - 1) as unknown as Array<[number, string, string]>;
      const last = keys.length === 2 ? keys[0]! : undefined;
      const { open, close } = frame(last ? { started_at: last[0], source: last[1], run: last[2] } : null);
      const [body, count, withJson] = page.get(open, close, ...args, filter.limit) as unknown as [Uint8Array, number, number];
      return withJson < count ? undefined : body;
    } finally {
      if (own) commitRead.run();
    }
  };
}
