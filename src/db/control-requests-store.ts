// Control requests (stop, answer) for runs this Control Plane cannot reach on disk: recorded here, handed to the run's
// own worker in the response to its next ingest batch that carries the run.
import type { Db } from './open.ts';

export interface ControlRequest {
  id: number;
  source: string;
  run: string;
  action: string;
  /** Parsed payload object, or null. */
  payload: Record<string, unknown> | null;
  created_at: number;
}

export type ControlRequestsStore = ReturnType<typeof createControlRequestsStore>;

type Row = Omit<ControlRequest, 'payload'> & { payload: string | null };

function toRequest(row: Row): ControlRequest {
  return { ...row, payload: row.payload === null ? null : (JSON.parse(row.payload) as Record<string, unknown>) };
}

export function createControlRequestsStore(db: Db) {
  const addStmt = db.prepare(
    'INSERT INTO control_requests (source, run, action, payload, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
  );
  const pendingStmt = db.prepare(
    'SELECT id, source, run, action, payload, created_at FROM control_requests ' +
      'WHERE source = ? AND delivered_at IS NULL ORDER BY id',
  );
  const markStmt = db.prepare(
    'UPDATE control_requests SET delivered_at = ? WHERE source = ? AND run = ? AND delivered_at IS NULL ' +
      'RETURNING id, source, run, action, payload, created_at',
  );
  const latestStmt = db.prepare(
    'SELECT id, source, run, action, payload, created_at, delivered_at FROM control_requests ' +
      'WHERE source = ? AND run = ? AND action = ? ORDER BY id DESC LIMIT 1',
  );

  return {
    add(source: string, run: string, action: string, payload: Record<string, unknown> | null = null, at = Date.now()) {
      const payloadText = payload === null ? null : JSON.stringify(payload);
      const row = addStmt.get(source, run, action, payloadText, at) as { id: number };
      return row.id;
    },
    /** The undelivered requests for those runs, oldest first, now marked delivered. */
    takePending(source: string, runs: string[], at = Date.now()) {
      // RETURNING gives no order guarantee; runners apply requests oldest first.
      const rows = runs.flatMap((run) => markStmt.all(at, source, run) as unknown as Row[]);
      return rows.sort((a, b) => a.id - b.id).map(toRequest);
    },
    /** The undelivered requests, without marking them. */
    pending(source: string) {
      return (pendingStmt.all(source) as unknown as Row[]).map(toRequest);
    },
    /** The run's newest request of that action. */
    latest(source: string, run: string, action: string) {
      const row = latestStmt.get(source, run, action) as (Row & { delivered_at: number | null }) | undefined;
      return row ? { ...toRequest(row), delivered_at: row.delivered_at } : undefined;
    },
  };
}
