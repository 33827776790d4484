// The runs list's filter as SQL: the WHERE clause and its arguments, and the list order. Shared by the runs store
// (src/db/runs-store.ts) and the page query (runs-page-query.ts).
import type { SQLInputValue } from 'node:sqlite';
import type { RunFilter } from './run-types.ts';

/** Newest first; the (started_at, source, run) key is unique, so a keyset cursor never skips or repeats a run. */
export const ORDER = 'ORDER BY started_at DESC, source DESC, run DESC';

/** The list's WHERE clause (with a trailing space, or empty) and its arguments, for the list and page queries. */
export function buildWhere(filter: RunFilter): { clause: string; args: SQLInputValue[] } {
  const where: string[] = [];
  const args: SQLInputValue[] = [];
  if (filter.verdict === null) where.push('verdict IS NULL');
  else if (filter.verdict !== undefined) {
    where.push('verdict = ?');
    args.push(filter.verdict);
  }
  for (const col of ['repo', 'group_id', 'status', 'source'] as const) {
    if (filter[col] === undefined) continue;
    where.push(`${col} = ?`);
    args.push(filter[col]);
  }
  if (filter.since !== undefined) {
    where.push('started_at >= ?');
    args.push(filter.since);
  }
  // A cursor and an `until` bound the same index column from above, and SQLite ranges the index on one of them and
  // merely filters by the other: a cursor 50,000 runs down under `until` walked 50,000 index entries per page. One
  // always implies the other, so only the tighter one goes into the query: with s < until ≤ cursor.started_at the
  // cursor holds for every row, and with cursor.started_at < until the cursor (s ≤ cursor.started_at) implies until.
  const cursorIsTighter =
    filter.after !== undefined && filter.until !== undefined && filter.after.started_at < filter.until;
  if (filter.until !== undefined && !cursorIsTighter) {
    where.push('started_at < ?');
    args.push(filter.until);
  }
  if (filter.after && (filter.until === undefined || cursorIsTighter)) {
    // Row-value comparison keeps the keyset walk on the (started_at, source, run) index suffix.
    where.push('(started_at, source, run) < (?, ?, ?)');
    args.push(filter.after.started_at, filter.after.source, filter.after.run);
  }
  return { clause: where.length ? `WHERE ${where.join(' AND ')} ` : '', args };
}
