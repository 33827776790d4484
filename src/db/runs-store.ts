// Runs table: upsert, patch, keyset-paged list, counts and the cascading delete. Times are unix ms. Every write stores
// the run's Run JSON text with its row, so a list page reads one cell per run (docs/bench.md: the list's p99 bar).
import type { SQLInputValue, StatementSync } from 'node:sqlite';
import { LIMIT_PARAM, statementCache, transaction, type Db } from './open.ts';
import { ACTIVE_STATUSES, TERMINAL_STATUSES, type RunStatus } from '../run-json.ts';
import type { CostFigures, MeteredCost, RunJson } from '../run-json.ts';
import { iso } from '../iso-time.ts';
import { tryParseJson } from '../untrusted.ts';
import {
  failureColumns, type DeleteOutcome, type RunFilter, type RunInput, type RunKey, type RunPatch, type RunRow,
} from './run-types.ts';

export type RunsStore = ReturnType<typeof createRunsStore>;
/** A row as ingest reads it: with its run's key digest, which never leaves the Control Plane (ingest-apply.ts). */
export type KeyedRunRow = RunRow & { run_key_sha256: Uint8Array | null; run_key_moved: number };

/** Constants of ours as SQL literals, never input. */
const sqlList = (statuses: readonly string[]) => statuses.map((x) => `'${x}'`).join(', ');
const ACTIVE: ReadonlySet<string> = new Set(ACTIVE_STATUSES);

const COLUMNS = [
  'repo', 'repo_path', 'group_id', 'status', 'verdict', 'brief', 'origin', 'provider', 'branch', 'pr_url', 'question',
  'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error', 'pid', 'extra',
  'failure_class', 'failure_reason', 'failure_retryable', 'reported', 'metered', 'trace_id',
] as const;
type Column = (typeof COLUMNS)[number];
const COLUMN_SET: ReadonlySet<string> = new Set(COLUMNS);
// Internal fields a later upsert may omit without erasing what is known.
const STICKY: ReadonlySet<Column> = new Set(['repo_path', 'pid', 'extra']);

/** started_at is the list's sort key: the first-seen value wins, so no later ingest moves a row under a cursor. */
function updateClause(c: Column): string {
  if (c === 'started_at') return 'started_at = runs.started_at';
  return STICKY.has(c) ? `${c} = coalesce(excluded.${c}, runs.${c})` : `${c} = excluded.${c}`;
}

/**
 * The columns an index names (control migrations 1, 2 and 7), started_at aside (an upsert keeps its first value).
 * SQLite rewrites the entry of every index on a column an UPDATE sets, changed or not.
 */
const INDEXED: ReadonlySet<Column> = new Set([
  'repo', 'group_id', 'status', 'verdict', 'provider', 'ended_at', 'cost_usd', 'tokens_in', 'tokens_out',
  'failure_class',
]);

/** A RunRow's; the stored JSON text is the page's business only. */
const ROW_COLUMNS = ['source', 'run', ...COLUMNS].join(', ');
/** A write returns the row as it now stands; json = NULL until its text is stored, so a crash leaves no stale one. */
const PATCH_TAIL = `, json = NULL WHERE source = ? AND run = ? RETURNING rowid AS rowid_, ${ROW_COLUMNS}`;
type Written = RunRow & { rowid_: number };

export function createRunsStore(db: Db) {
  const getStmt = db.prepare(`SELECT ${ROW_COLUMNS} FROM runs WHERE source = ? AND run = ?`);
  const upsertStmt = db.prepare(
    `INSERT INTO runs (source, run, ${COLUMNS.join(', ')}) VALUES (?, ?, ${COLUMNS.map(() => '?').join(', ')})
     ON CONFLICT (source, run) DO UPDATE SET ${COLUMNS.map(updateClause).join(', ')}, json = NULL
     WHERE excluded.updated_at >= runs.updated_at RETURNING rowid AS rowid_, ${ROW_COLUMNS}`,
  );
  // The upsert's update of a row whose indexed columns it leaves as they are, with the upsert's arguments (?1 source,
  // ?2 run, then COLUMNS): it sets no indexed column, so it rewrites no index entry. A runner ships its run with every
  // batch, most often with only updated_at changed: the full upsert cost ~1 µs per event of the fan-in (docs/bench.md).
  const param = (c: Column) => `?${COLUMNS.indexOf(c) + 3}`;
  const updateUnindexedStmt = db.prepare(
    `UPDATE runs SET ${COLUMNS.filter((c) => c !== 'started_at' && !INDEXED.has(c))
      .map((c) => (STICKY.has(c) ? `${c} = coalesce(${param(c)}, ${c})` : `${c} = ${param(c)}`))
      .join(', ')}, json = NULL
     WHERE source = ?1 AND run = ?2 AND ${param('updated_at')} >= updated_at
     AND ${[...INDEXED].map((c) => `${c} IS ${param(c)}`).join(' AND ')} RETURNING rowid AS rowid_, ${ROW_COLUMNS}`,
  );
  const setJsonStmt = db.prepare('UPDATE runs SET json = ? WHERE rowid = ?');
  const countActiveStmt = db.prepare(
    `SELECT count(*) AS n FROM runs WHERE status IN (${sqlList(ACTIVE_STATUSES)}) AND source = ?`,
  );
  const activeByStatusStmt = db.prepare(
    `SELECT status, count(*) AS n FROM runs WHERE status IN (${sqlList(ACTIVE_STATUSES)}) GROUP BY status`,
  );
  // The started_at bound (implied by the other) keeps the walk on runs_by_start.
  const listEndedStmt = db.prepare(
    `SELECT source, run FROM runs WHERE started_at < ? AND status IN (${sqlList(TERMINAL_STATUSES)})
     AND coalesce(ended_at, updated_at) < ? ORDER BY started_at ${LIMIT_PARAM}`,
  );
  const pingStmt = db.prepare('SELECT 1 FROM runs LIMIT 1');
  const statement = statementCache(db);
  const pageStatement = statementCache(db, true);
  const statusStmt = db.prepare('SELECT status FROM runs WHERE source = ? AND run = ?');
  const getKeyedStmt = db.prepare(
    `SELECT ${ROW_COLUMNS}, run_key_sha256, run_key_moved FROM runs WHERE source = ? AND run = ?`,
  );
  // `IS ?`: NULL for a run bound to no key yet, else equal to the given digest.
  const bindKeyStmt = db.prepare(
    'UPDATE runs SET run_key_sha256 = ?, run_key_moved = ? WHERE source = ? AND run = ? AND run_key_sha256 IS ?',
  );
  const keyMovedStmt = db.prepare('SELECT run_key_moved FROM runs WHERE source = ? AND run = ?');
  // Set once: no later batch, the runner's or its agent's, moves the time its run is ended by.
  const leaseStmt = db.prepare('UPDATE runs SET lease_until = ? WHERE source = ? AND run = ? AND lease_until IS NULL');
  const lapsedStmt = db.prepare(
    `SELECT source, run FROM runs WHERE lease_until < ? AND status IN (${sqlList(ACTIVE_STATUSES)}) ${LIMIT_PARAM}`,
  );
  // A start request_id whose run is gone may start a new run, so its start request goes with it.
  const cascade = ['events', 'artifacts', 'control_requests', 'start_requests', 'runs'].map((table) =>
    db.prepare(`DELETE FROM ${table} WHERE source = ? AND run = ?`));

  /** One write that returns the row (none when it changed none), and that row's Run JSON text stored. */
  function write(stmt: StatementSync, args: SQLInputValue[]): boolean {
    return transaction(db, () => {
      const row = stmt.get(...args) as Written | undefined;
      if (row) setJsonStmt.run(JSON.stringify(runToJson(row)), row.rowid_);
      return row !== undefined;
    });
  }

  function patch(source: string, run: string, fields: RunPatch): boolean {
    const given = fields as Record<string, unknown>;
    const keys = Object.keys(fields).filter((k) => COLUMN_SET.has(k) && given[k] !== undefined).sort();
    if (keys.length === 0) return getStmt.get(source, run) !== undefined;
    const stmt = statement(`UPDATE runs SET ${keys.map((k) => `${k} = ?`).join(', ')}${PATCH_TAIL}`);
    return write(stmt, [...keys.map((k) => (fields as Record<string, SQLInputValue>)[k]!), source, run]);
  }

  /** Newest first by (started_at, source, run), keyset after `filter.after`, at most `filter.limit` rows. */
  function list(filter: RunFilter): RunRow[] {
    const { sql, args } = buildListQuery(filter, ROW_COLUMNS);
    return statement(sql).all(...args) as unknown as RunRow[];
  }

  return {
    get: (source: string, run: string) => getStmt.get(source, run) as RunRow | undefined,
    /** An older `updated_at` never overwrites a newer row; started_at keeps its first value. */
    upsert(source: string, input: RunInput) {
      const row: Record<string, unknown> = { group_id: input.run, updated_at: input.started_at, ...input };
      const args = [source, input.run, ...COLUMNS.map((c) => (row[c] ?? null) as SQLInputValue)];
      // No row yet, an update older than the row's or an indexed column that changes: the plain upsert.
      return transaction(db, () => write(updateUnindexedStmt, args) || write(upsertStmt, args));
    },
    patch,
    /** The row and, in the same read, the SHA-256 of the run's key (control migration 11): null when none is bound. */
    getKeyed: (source: string, run: string) => getKeyedStmt.get(source, run) as KeyedRunRow | undefined,
    /**
     * Binds the run to a key's digest; a run already bound keeps its first, unless `from` names it: a run bound to
     * a handed key moves onto the key it was made from (ingest-apply.ts checkRunKey).
     */
    bindKey: (source: string, run: string, digest: Uint8Array, from: Uint8Array | null = null): void =>
      void bindKeyStmt.run(digest, from === null ? 0 : 1, source, run, from),
    /** Whether the run moved from a handed key onto the key it was made from (control migration 12). */
    keyMoved: (source: string, run: string): boolean =>
      (keyMovedStmt.get(source, run) as { run_key_moved: number } | undefined)?.run_key_moved === 1,
    /** A run that goes on (resumed, stopping) keeps no failure from before; one that ends is given its own. */
    setStatus(source: string, run: string, status: RunStatus, at: number, fields: RunPatch = {}) {
      const ended = status === 'failed' || status === 'stopped';
      return patch(source, run, { ...(ended ? {} : failureColumns(null)), ...fields, status, updated_at: at });
    },
    list,
    /** Every run `list` selects, a page of `filter.limit` read each time the caller has taken the one before. */
    *each(filter: RunFilter): Generator<RunRow> {
      for (let page = list(filter); ; page = list({ ...filter, after: page.at(-1)! })) {
        yield* page;
        if (page.length < filter.limit || page.length === 0) return;
      }
    },
    /** The same runs as Run JSON texts, and the last one's key when another page follows (one row past the page). */
    page(filter: RunFilter): { items: string[]; next: RunKey | null } {
      const { sql, args } = buildListQuery({ ...filter, limit: filter.limit + 1 }, 'json, started_at, source, run');
      const rows = pageStatement(sql).all(...args) as unknown as Array<[string | null, number, string, string]>;
      const page = rows.slice(0, filter.limit);
      // A run changed by plain SQL has no text (control migration 3's trigger drops it).
      const text = (source: string, run: string): string =>
        JSON.stringify(runToJson(getStmt.get(source, run) as unknown as RunRow));
      const items = page.map(([json, , source, run]) => json ?? text(source, run));
      const last = page[page.length - 1];
      const more = rows.length > filter.limit && last !== undefined;
      return { items, next: more ? { started_at: last[1], source: last[2], run: last[3] } : null };
    },
    countActive: (source: string) => Number((countActiveStmt.get(source) as { n: number }).n),
    /** Only the active statuses that have runs. */
    countActiveByStatus: () => activeByStatusStmt.all() as unknown as Array<{ status: string; n: number }>,
    /** Oldest terminal runs that ended before `before`. */
    listEnded: (before: number, limit: number) =>
      listEndedStmt.all(before, before, limit) as unknown as Array<{ source: string; run: string }>,
    /** The time a remote run must have ended by (control migration 14); kept when the run has one. */
    setLease: (source: string, run: string, until: number): void => void leaseStmt.run(until, source, run),
    /** Active runs whose lease ended before `now`. */
    listLapsed: (now: number, limit: number) =>
      lapsedStmt.all(now, limit) as unknown as Array<{ source: string; run: string }>,
    /** Throws when the DB is unusable (/ready). */
    ping: (): void => void pingStmt.get(),
    /** Active runs are kept; a deleted one takes its events, artifacts, control and start requests along. */
    delete(source: string, run: string): DeleteOutcome {
      return transaction(db, () => {
        const row = statusStmt.get(source, run) as { status: string } | undefined;
        if (!row) return 'not_found';
        if (ACTIVE.has(row.status)) return 'active';
        for (const stmt of cascade) stmt.run(source, run);
        return 'deleted';
      });
    },
  };
}

/** Newest first; the (started_at, source, run) key is unique, so a keyset cursor never skips or repeats a run. */
const ORDER = 'ORDER BY started_at DESC, source DESC, run DESC';

/** The clause has a trailing space, or is empty; `extra` conditions (constant SQL) are ANDed on. */
export function buildWhere(
  filter: Omit<RunFilter, 'limit'>, extra: readonly string[] = [],
): { clause: string; args: SQLInputValue[] } {
  const where: string[] = [];
  const args: SQLInputValue[] = [];
  if (filter.verdict === null) where.push('verdict IS NULL');
  for (const col of ['verdict', 'repo', 'group_id', 'status', 'source', 'failure_class'] as const) {
    if (filter[col] === undefined || filter[col] === null) continue;
    where.push(`${col} = ?`);
    args.push(filter[col]);
  }
  if (filter.since !== undefined) {
    where.push('started_at >= ?');
    args.push(filter.since);
  }
  // A cursor and an `until` both bound started_at from above and SQLite ranges the index on only one (a deep cursor
  // under `until` walked 50,000 entries per page); one always implies the other, so only the tighter one is given.
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
  where.push(...extra);
  return { clause: where.length ? `WHERE ${where.join(' AND ')} ` : '', args };
}

/** The list query for a filter: pure, so tests can EXPLAIN it; one prepared statement per filter shape. */
export function buildListQuery(filter: RunFilter, columns = ROW_COLUMNS): { sql: string; args: SQLInputValue[] } {
  const { clause, args } = buildWhere(filter);
  args.push(filter.limit);
  return { sql: `SELECT ${columns} FROM runs ${clause}${ORDER} ${LIMIT_PARAM}`, args };
}

/** The one place a stored row becomes DESIGN §3 Run JSON; `repo_path`, `pid` and `extra` never leave the server. */
export function runToJson(row: RunRow): RunJson {
  // Written out in DESIGN §3's order: the ingest path makes one per run it writes, so no per-key arrays or copies.
  return {
    source: row.source,
    run: row.run,
    repo: row.repo,
    group_id: row.group_id,
    status: row.status,
    verdict: row.verdict,
    brief: row.brief,
    origin: row.origin,
    provider: row.provider,
    branch: row.branch,
    pr_url: row.pr_url,
    question: row.question,
    started_at: iso(row.started_at),
    ended_at: iso(row.ended_at),
    updated_at: iso(row.updated_at),
    cost_usd: row.cost_usd,
    tokens_in: row.tokens_in,
    tokens_out: row.tokens_out,
    exit_code: row.exit_code,
    error: row.error,
    failure: row.failure_class === null
      ? null
      : { class: row.failure_class, reason: row.failure_reason ?? '', retryable: row.failure_retryable === 1 },
    reported: costText<CostFigures>(row.reported),
    metered: costText<MeteredCost>(row.metered),
    trace_id: row.trace_id ?? null,
  };
}

/** Written by ingest after validation. */
function costText<T>(text: string | null): T | null {
  return text === null ? null : ((tryParseJson(text) ?? null) as T | null);
}
