// All Control Plane stores over one connection; each prepares its statements once. The small tables' stores are here.
import { hash } from 'node:crypto';
import { transaction, type Db } from './open.ts';
import { ConflictError } from '../errors.ts';
import { createRunsStore } from './runs-store.ts';
import { createEventsStore } from './events-store.ts';
import { createAuditStore } from './audit-store.ts';
import { createNotificationsStore } from './notifications-store.ts';
import { createStatsStore } from './stats-store.ts';

export type ControlStores = ReturnType<typeof createControlStores>;

export function createControlStores(db: Db) {
  return {
    runs: createRunsStore(db),
    events: createEventsStore(db),
    artifacts: createArtifactsStore(db),
    controlRequests: createControlRequestsStore(db),
    audit: createAuditStore(db),
    config: createConfigStore(db),
    notifications: createNotificationsStore(db),
    stats: createStatsStore(db),
    startRequests: createStartRequestsStore(db),
    mergeQueue: createMergeQueueStore(db),
    projects: createProjectsStore(db),
    deletedRuns: createDeletedRunsStore(db),
    servedRepos: createServedReposStore(db),
  };
}

interface StartRequest {
  request_id: string;
  body_sha256: string;
  source: string;
  run: string;
  created_at: number;
}

/** start_requests: POST /v1/start is idempotent by request_id (same id + same body → same run; else a conflict). */
function createStartRequestsStore(db: Db) {
  const getStmt = db.prepare(
    'SELECT request_id, body_sha256, source, run, created_at FROM start_requests WHERE request_id = ?',
  );
  const addStmt = db.prepare(
    'INSERT INTO start_requests (request_id, body_sha256, source, run, created_at) VALUES (?, ?, ?, ?, ?) ' +
      'ON CONFLICT (request_id) DO NOTHING',
  );
  const removeStmt = db.prepare('DELETE FROM start_requests WHERE request_id = ?');
  return {
    get: (requestId: string) => getStmt.get(requestId) as StartRequest | undefined,
    /** False when the id was taken. */
    add: (row: StartRequest): boolean =>
      Number(addStmt.run(row.request_id, row.body_sha256, row.source, row.run, row.created_at).changes) > 0,
    /** Its run is gone, so the id may start a new run. */
    remove: (requestId: string): boolean => Number(removeStmt.run(requestId).changes) > 0,
  };
}

/** projects: registered by POST /v1/import, as real paths; with `repos` the only places the Control Plane runs in. */
function createProjectsStore(db: Db) {
  const addStmt = db.prepare('INSERT INTO projects (path, registered_at) VALUES (?, ?) ON CONFLICT (path) DO NOTHING');
  const hasStmt = db.prepare('SELECT 1 AS found FROM projects WHERE path = ?');
  const listStmt = db.prepare('SELECT path, registered_at FROM projects ORDER BY registered_at, path');
  return {
    /** True when the path was new. */
    add: (path: string, now: number): boolean => Number(addStmt.run(path, now).changes) > 0,
    has: (path: string): boolean => hasStmt.get(path) !== undefined,
    /** Oldest first. */
    list: () => listStmt.all() as unknown as Array<{ path: string; registered_at: number }>,
  };
}

/** deleted_runs: a run shipped again (`svc ship`, a late flush) stays deleted; a POST /v1/import forgets it. */
function createDeletedRunsStore(db: Db) {
  const addStmt = db.prepare(
    `INSERT INTO deleted_runs (source, run, deleted_at) VALUES (?, ?, ?)
     ON CONFLICT (source, run) DO UPDATE SET deleted_at = excluded.deleted_at`,
  );
  const hasStmt = db.prepare('SELECT 1 AS found FROM deleted_runs WHERE source = ? AND run = ?');
  const forgetStmt = db.prepare('DELETE FROM deleted_runs WHERE source = ? AND run = ?');
  return {
    add: (source: string, run: string, now: number): void => void addStmt.run(source, run, now),
    has: (source: string, run: string): boolean => hasStmt.get(source, run) !== undefined,
    forget: (source: string, run: string): void => void forgetStmt.run(source, run),
  };
}

/** served_repos: each trigger server's repositories; a report replaces its source's list whole. */
function createServedReposStore(db: Db) {
  const clearStmt = db.prepare('DELETE FROM served_repos WHERE source = ?');
  const addStmt = db.prepare(
    'INSERT INTO served_repos (source, name, reported_at) VALUES (?, ?, ?) ON CONFLICT (source, name) DO NOTHING',
  );
  const listStmt = db.prepare('SELECT source, name, reported_at FROM served_repos ORDER BY name, source');
  return {
    // Inside the ingest batch's transaction: all or nothing with the rest of the batch.
    replace(source: string, names: readonly string[], now: number): void {
      clearStmt.run(source);
      for (const name of names) addStmt.run(source, name, now);
    },
    list: () => listStmt.all() as unknown as Array<{ source: string; name: string; reported_at: number }>,
  };
}

interface ControlRequest {
  id: number;
  source: string;
  run: string;
  action: string;
  payload: Record<string, unknown> | null;
  created_at: number;
}

type Row = Omit<ControlRequest, 'payload'> & { payload: string | null };

function toRequest(row: Row): ControlRequest {
  return { ...row, payload: row.payload === null ? null : (JSON.parse(row.payload) as Record<string, unknown>) };
}

/** control_requests: stops and answers for runs not on this disk, handed to the run's worker in an ingest reply. */
function createControlRequestsStore(db: Db) {
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
      return (addStmt.get(source, run, action, payloadText, at) as { id: number }).id;
    },
    /** The undelivered requests for those runs, oldest first, now marked delivered. */
    takePending(source: string, runs: string[], at = Date.now()) {
      // RETURNING gives no order guarantee; runners apply requests oldest first.
      const rows = runs.flatMap((run) => markStmt.all(at, source, run) as unknown as Row[]);
      return rows.sort((a, b) => a.id - b.id).map(toRequest);
    },
    /** Without marking them. */
    pending: (source: string) => (pendingStmt.all(source) as unknown as Row[]).map(toRequest),
    latest(source: string, run: string, action: string) {
      const row = latestStmt.get(source, run, action) as (Row & { delivered_at: number | null }) | undefined;
      return row ? { ...toRequest(row), delivered_at: row.delivered_at } : undefined;
    },
  };
}

interface ArtifactRow {
  source: string;
  run: string;
  path: string;
  content_type: string;
  sha256: string;
  size: number;
  content: Uint8Array;
  created_at: number;
}

/** artifacts: a run's files with their sha256, in the DB; paths are checked by the caller (params.ts). */
function createArtifactsStore(db: Db) {
  // node:sqlite binds a zero-length view of a zero-length ArrayBuffer as NULL: coalesce makes it an empty blob.
  const putStmt = db.prepare(
    `INSERT INTO artifacts (source, run, path, content_type, sha256, size, content, created_at)
     VALUES (?, ?, ?, ?, ?, ?, coalesce(?, X''), ?)
     ON CONFLICT (source, run, path) DO UPDATE SET content_type = excluded.content_type, sha256 = excluded.sha256,
     size = excluded.size, content = excluded.content, created_at = excluded.created_at`,
  );
  const getStmt = db.prepare('SELECT * FROM artifacts WHERE source = ? AND run = ? AND path = ?');
  const listStmt = db.prepare(
    'SELECT source, run, path, content_type, sha256, size, created_at FROM artifacts ' +
      'WHERE source = ? AND run = ? ORDER BY path',
  );

  return {
    /** Replaces a file at the same path. */
    put(source: string, run: string, input: Pick<ArtifactRow, 'path' | 'content_type' | 'content'> & {
      created_at?: number;
    }): void {
      const { path, content_type, content, created_at = Date.now() } = input;
      const sha256 = hash('sha256', content, 'hex');
      putStmt.run(source, run, path, content_type, sha256, content.length, content, created_at);
    },
    get: (source: string, run: string, path: string) => getStmt.get(source, run, path) as ArtifactRow | undefined,
    /** Sorted by path, without content. */
    list: (source: string, run: string) =>
      listStmt.all(source, run) as unknown as Array<Omit<ArtifactRow, 'content'>>,
  };
}

type MergeStatus = 'queued' | 'merged' | 'failed';

export interface MergeEntry {
  id: number;
  source: string;
  run: string;
  status: MergeStatus;
  detail: string | null;
  added_at: number;
  updated_at: number;
}

/** merge_queue: runs waiting to be merged, in the order they were added; status queued → merged | failed. */
function createMergeQueueStore(db: Db) {
  const cols = 'id, source, run, status, detail, added_at, updated_at';
  const addStmt = db.prepare(
    `INSERT INTO merge_queue (source, run, status, detail, added_at, updated_at) VALUES (?, ?, 'queued', NULL, ?, ?)
     ON CONFLICT (source, run) DO UPDATE SET status = 'queued', detail = NULL, added_at = excluded.added_at,
     updated_at = excluded.updated_at
     WHERE merge_queue.status = 'failed'
     RETURNING ${cols}`,
  );
  const getStmt = db.prepare(`SELECT ${cols} FROM merge_queue WHERE source = ? AND run = ?`);
  const listStmt = db.prepare(`SELECT ${cols} FROM merge_queue ORDER BY added_at, id`);
  const queuedStmt = db.prepare(`SELECT ${cols} FROM merge_queue WHERE status = 'queued' ORDER BY added_at, id`);
  const setStmt = db.prepare('UPDATE merge_queue SET status = ?, detail = ?, updated_at = ? WHERE id = ?');
  return {
    /** Undefined when the run is already queued. */
    add: (source: string, run: string, at: number) => addStmt.get(source, run, at, at) as MergeEntry | undefined,
    get: (source: string, run: string) => getStmt.get(source, run) as MergeEntry | undefined,
    /** Oldest first, as queued(). */
    list: () => listStmt.all() as unknown as MergeEntry[],
    queued: () => queuedStmt.all() as unknown as MergeEntry[],
    setStatus: (id: number, status: MergeStatus, detail: string | null, at: number): void =>
      void setStmt.run(status, detail, at, id),
  };
}

// config: one row, a JSON body and a version that rises by one on every write (for If-Match).
interface StoredConfig {
  /** Stored values only; merge with the schema's defaults before use. */
  values: Record<string, unknown>;
  /** 0 until the first write. */
  version: number;
  updated_at: number | null;
}

export class ConfigVersionConflict extends ConflictError {
  readonly current: number;
  constructor(current: number) {
    super(`Config is at version ${current}`);
    this.current = current;
  }
}

export type ConfigStore = ReturnType<typeof createConfigStore>;

export function createConfigStore(db: Db, clock: () => number = Date.now) {
  const select = db.prepare('SELECT version, body, updated_at FROM config WHERE id = 1');
  const upsert = db.prepare(
    'INSERT INTO config (id, version, body, updated_at) VALUES (1, ?, ?, ?) ' +
      'ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body, ' +
      'updated_at = excluded.updated_at',
  );

  function read(): StoredConfig {
    const row = select.get() as { version: number; body: string; updated_at: number } | undefined;
    if (!row) return { values: {}, version: 0, updated_at: null };
    const values = JSON.parse(row.body) as Record<string, unknown>;
    return { values, version: row.version, updated_at: row.updated_at };
  }

  return {
    read,
    /** One transaction, so two writers cannot both win; ConfigVersionConflict when `expectedVersion` is not it. */
    update(fn: (current: Record<string, unknown>) => Record<string, unknown>, expectedVersion?: number): StoredConfig {
      return transaction(db, () => {
        const current = read();
        if (expectedVersion !== undefined && expectedVersion !== current.version) {
          throw new ConfigVersionConflict(current.version);
        }
        const values = fn(current.values);
        const next = { values, version: current.version + 1, updated_at: clock() };
        upsert.run(next.version, JSON.stringify(values), next.updated_at);
        return next;
      });
    },
  };
}
