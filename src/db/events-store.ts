// Events table: idempotent insert on (source, run, seq), ascending reads by id. `data` is stored as JSON text, never
// re-parsed here. Each of the two needs its own index: a run's seq order is not its id order (the Control Plane's own
// seqs count down; a signer's or an agent's seqs may jump), so neither index serves the other (docs/bench.md).
import { LIMIT_PARAM, type Db } from './open.ts';
import { ConflictError } from '../errors.ts';

export interface EventRow {
  id: number;
  source: string;
  run: string;
  seq: number;
  ts: number;
  kind: string;
  /** JSON text. */
  data: string;
}

export type EventInput = Omit<EventRow, 'id'>;

export type EventsStore = ReturnType<typeof createEventsStore>;

/** The reads whose plans a test pins (test/unit/events-store.test.ts). */
export const EVENTS_SQL = {
  run: `SELECT * FROM events WHERE source = ? AND run = ? AND id > ? ORDER BY id ${LIMIT_PARAM}`,
  // `+source`: by id from the cursor, not by events_by_run's source prefix, which read and sorted every event the
  // source ever had at each stream's (re)connect (~200 ms at a million). Now a source quiet since its cursor while
  // others shipped pays for theirs instead (docs/bench-history.md, one index on events).
  source: `SELECT * FROM events WHERE id > ? AND +source = ? ORDER BY id ${LIMIT_PARAM}`,
  any: `SELECT * FROM events WHERE id > ? ORDER BY id ${LIMIT_PARAM}`,
  latest: 'SELECT * FROM events WHERE source = ? AND run = ? AND kind = ? ORDER BY id DESC LIMIT 1',
  minSeq: 'SELECT min(seq) AS m FROM events WHERE source = ? AND run = ?',
} as const;

export function createEventsStore(db: Db) {
  const insertStmt = db.prepare(
    'INSERT INTO events (source, run, seq, ts, kind, data) VALUES (?, ?, ?, ?, ?, ?) ' +
      'ON CONFLICT (source, run, seq) DO NOTHING',
  );
  const minSeq = db.prepare(EVENTS_SQL.minSeq);
  const maxSeq = db.prepare('SELECT coalesce(max(seq), 0) AS m FROM events WHERE source = ? AND run = ?');
  const listRun = db.prepare(EVENTS_SQL.run);
  const listAny = db.prepare(EVENTS_SQL.any);
  const listSource = db.prepare(EVENTS_SQL.source);
  const maxStmt = db.prepare('SELECT coalesce(max(id), 0) AS m FROM events');
  const deletedMaxStmt = db.prepare('SELECT max_id AS m FROM events_deleted_max');
  const moveStmt = db.prepare('UPDATE events SET id = ? WHERE id = ?');
  /** The largest id this store gave out or found stored or deleted: every new id is above it (control migration 13). */
  let highest = Math.max(Number((maxStmt.get() as { m: number }).m), Number((deletedMaxStmt.get() as { m: number }).m));
  const latestStmt = db.prepare(EVENTS_SQL.latest);
  const latestOwnStmt = db.prepare(
    'SELECT * FROM events WHERE source = ? AND run = ? AND kind = ? AND seq < 0 ORDER BY id DESC LIMIT 1',
  );
  const runnerAfterStmt = db.prepare(
    'SELECT data FROM events WHERE source = ? AND run = ? AND kind = ? AND seq >= 0 AND id > ? ORDER BY id',
  );

  /** The new id, or null when (source, run, seq) was already stored. */
  function insert(ev: EventInput): number | null {
    // run() + lastInsertRowid measured ~2x faster than RETURNING on the ingest hot path.
    const r = insertStmt.run(ev.source, ev.run, ev.seq, ev.ts, ev.kind, ev.data);
    if (Number(r.changes) === 0) return null;
    let id = Number(r.lastInsertRowid);
    // SQLite took the largest id left plus one: the newest events were deleted (or a transaction rolled back, whose
    // ids nobody saw; skipping them costs nothing). Once moved, the next inserts follow on from this one.
    if (id <= highest) {
      moveStmt.run(highest + 1, id);
      id = highest + 1;
    }
    highest = id;
    return id;
  }

  return {
    insert,
    /** An event the Control Plane originates (e.g. `answer`): seq -1, -2, …, never a runner's 0, 1, 2, … */
    append(source: string, run: string, ev: { kind: string; data?: unknown; ts?: number }): EventRow {
      const { kind, data = {}, ts = Date.now() } = ev;
      const m = (minSeq.get(source, run) as { m: number | null }).m;
      const seq = m === null || m >= 0 ? -1 : m - 1;
      const text = JSON.stringify(data);
      const id = insert({ source, run, seq, ts, kind, data: text });
      if (id === null) throw new ConflictError(`Event seq ${seq} of ${source}/${run} already exists`);
      return { id, source, run, seq, ts, kind, data: text };
    },
    /** Events with id > after, ascending: one run's (its page, stream replay), a source's, or all. */
    listAll({ after, limit, source, run }: { after: number; limit: number; source?: string; run?: string }) {
      if (source !== undefined && run !== undefined) {
        return listRun.all(source, run, after, limit) as unknown as EventRow[];
      }
      if (source !== undefined) return listSource.all(after, source, limit) as unknown as EventRow[];
      return listAny.all(after, limit) as unknown as EventRow[];
    },
    maxId: () => Number((maxStmt.get() as { m: number }).m),
    /** The highest seq a runner sent for the run (0: none). */
    maxSeq: (source: string, run: string) => Number((maxSeq.get(source, run) as { m: number }).m),
    latest: (source: string, run: string, kind: string) => latestStmt.get(source, run, kind) as EventRow | undefined,
    /** The newest event of `kind` the Control Plane originated (seq below 0; see `append`). */
    latestOwn: (source: string, run: string, kind: string) =>
      latestOwnStmt.get(source, run, kind) as EventRow | undefined,
    /** The data texts of the run's events of `kind` its runners sent (seq 0 and up) stored after event id `after`. */
    runnerDataAfter: (source: string, run: string, kind: string, after: number) =>
      (runnerAfterStmt.all(source, run, kind, after) as { data: string }[]).map((r) => r.data),
  };
}
