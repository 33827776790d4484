// Runs table: upsert, patch, keyset-paged list and the small counts. Times are unix ms; the wire format lives in
// run-row-json.ts. The cascading delete lives beside it (run-delete.ts).
//
// Methods other code relies on:
//   get(source, run)            → RunRow | undefined
//   upsert(source, input)       → insert or replace the public fields; an older `updated_at` never overwrites a newer
//                                 row; started_at keeps its first-seen value
//   patch(source, run, fields)  → update only the given columns (e.g. {status, question, updated_at}); returns
//                                 whether a row changed
//   setStatus(source, run, status, at, extra?) → patch sugar that also stamps updated_at
//   list(filter)                → newest first by (started_at, source, run), keyset after `filter.after`, at most
//                                 `filter.limit` rows
//   count()                     → number of runs
//   countActive(source)         → runs of that source that are queued, running, blocked or stopping
//   listEnded(before, limit)    → oldest terminal runs that ended before `before` (retention), as {source, run}
//   ping()                      → runs a trivial query; throws when the DB is unusable (/ready)
//   delete(source, run)         → 'deleted' | 'not_found' | 'active' (active runs are kept); removes its events,
//                                 artifacts, control and start requests
import type { SQLInputValue, StatementSync } from 'node:sqlite';
import type { Db } from './open.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES, type RunStatus } from '../run-json.ts';
import type { DeleteOutcome, RunFilter, RunInput, RunPatch, RunRow } from './run-types.ts';

// The types of the store's own interface, for its callers (their home is run-types.ts).
export type { DeleteOutcome, RunFilter, RunInput, RunKey, RunPatch, RunRow } from './run-types.ts';
import { buildWhere, ORDER } from './runs-where.ts';
import { createRunDelete } from './run-delete.ts';
import { LIMIT_PARAM } from './limit-param.ts';

/** The status lists as SQL literals: constants of ours, never input. */
const sqlList = (statuses: readonly string[]) => statuses.map((x) => `'${x}'`).join(', ');

export interface RunsStore {
  get(source: string, run: string): RunRow | undefined;
  upsert(source: string, input: RunInput): boolean;
  patch(source: string, run: string, fields: RunPatch): boolean;
  setStatus(source: string, run: string, status: RunStatus, at: number, fields?: RunPatch): boolean;
  list(filter: RunFilter): RunRow[];
  count(): number;
  countActive(source: string): number;
  listEnded(before: number, limit: number): Array<{ source: string; run: string }>;
  ping(): void;
  delete(source: string, run: string): DeleteOutcome;
}

const COLUMNS = [
  'repo', 'repo_path', 'group_id', 'status', 'verdict', 'brief', 'origin', 'provider', 'branch', 'pr_url', 'question',
  'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error', 'pid', 'extra',
] as const;
type Column = (typeof COLUMNS)[number];
const COLUMN_SET: ReadonlySet<string> = new Set(COLUMNS);
// Internal fields a runner may omit on a later upsert without erasing what we already know.
const STICKY: ReadonlySet<Column> = new Set(['repo_path', 'pid', 'extra']);

/**
 * started_at is the list's sort key: the first-seen value wins, so a runner stamping its own start time on a later
 * ingest never moves a row under an open keyset cursor (the Control Plane inserts a run it launches before the engine
 * writes its first state).
 */
function updateClause(c: Column): string {
  if (c === 'started_at') return 'started_at = runs.started_at';
  return STICKY.has(c) ? `${c} = coalesce(excluded.${c}, runs.${c})` : `${c} = excluded.${c}`;
}

const ROW_COLUMNS = ['source', 'run', ...COLUMNS].join(', ');

export function createRunsStore(db: Db): RunsStore {
  const getStmt = db.prepare(`SELECT ${ROW_COLUMNS} FROM runs WHERE source = ? AND run = ?`);
  const upsertStmt = db.prepare(
    `INSERT INTO runs (source, run, ${COLUMNS.join(', ')}) VALUES (?, ?, ${COLUMNS.map(() => '?').join(', ')})
     ON CONFLICT (source, run) DO UPDATE SET ${COLUMNS.map(updateClause).join(', ')}
     WHERE excluded.updated_at >= runs.updated_at`,
  );
  const countStmt = db.prepare('SELECT count(*) AS n FROM runs');
  // runs_by_status narrows to the (few) active rows before the source check.
  const countActiveStmt = db.prepare(
    `SELECT count(*) AS n FROM runs WHERE status IN (${sqlList(ACTIVE_STATUSES)}) AND source = ?`,
  );
  // A run that ended before `before` started before it too: the started_at bound keeps the walk on runs_by_start.
  const listEndedStmt = db.prepare(
    `SELECT source, run FROM runs WHERE started_at < ? AND status IN (${sqlList(TERMINAL_STATUSES)})
     AND coalesce(ended_at, updated_at) < ? ORDER BY started_at ${LIMIT_PARAM}`,
  );
  const pingStmt = db.prepare('SELECT 1 FROM runs LIMIT 1');
  const patchCache = new Map<string, StatementSync>();
  const listCache = new Map<string, StatementSync>();
  const deleteRun = createRunDelete(db);

  function listStatement(sql: string): StatementSync {
    let stmt = listCache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      listCache.set(sql, stmt);
    }
    return stmt;
  }

  function patch(source: string, run: string, fields: RunPatch): boolean {
    const given = fields as Record<string, unknown>;
    const keys = Object.keys(fields).filter((k) => COLUMN_SET.has(k) && given[k] !== undefined).sort();
    if (keys.length === 0) return getStmt.get(source, run) !== undefined;
    const sig = keys.join(',');
    let stmt = patchCache.get(sig);
    if (!stmt) {
      const sets = keys.map((k) => `${k} = ?`).join(', ');
      stmt = db.prepare(`UPDATE runs SET ${sets} WHERE source = ? AND run = ?`);
      patchCache.set(sig, stmt);
    }
    const values = keys.map((k) => (fields as Record<string, SQLInputValue>)[k]!);
    return stmt.run(...values, source, run).changes > 0;
  }

  return {
    get(source, run) {
      return getStmt.get(source, run) as RunRow | undefined;
    },
    upsert(source, input) {
      const row: Record<string, unknown> = { group_id: input.run, updated_at: input.started_at, ...input };
      const values = COLUMNS.map((c) => (row[c] ?? null) as SQLInputValue);
      return upsertStmt.run(source, input.run, ...values).changes > 0;
    },
    patch,
    setStatus(source, run, status, at, fields = {}) {
      return patch(source, run, { ...fields, status, updated_at: at });
    },
    list(filter) {
      const { sql, args } = buildListQuery(filter, ROW_COLUMNS);
      return listStatement(sql).all(...args) as unknown as RunRow[];
    },
    count() {
      return Number((countStmt.get() as { n: number }).n);
    },
    countActive(source) {
      return Number((countActiveStmt.get(source) as { n: number }).n);
    },
    listEnded(before, limit) {
      return listEndedStmt.all(before, before, limit) as unknown as Array<{ source: string; run: string }>;
    },
    ping() {
      pingStmt.get();
    },
    delete: deleteRun,
  };
}

/** The list query for a filter: pure, so tests can EXPLAIN it; one prepared statement per filter shape. */
export function buildListQuery(filter: RunFilter, columns = ROW_COLUMNS): { sql: string; args: SQLInputValue[] } {
  const { clause, args } = buildWhere(filter);
  args.push(filter.limit);
  return { sql: `SELECT ${columns} FROM runs ${clause}${ORDER} ${LIMIT_PARAM}`, args };
}
