// Control Plane schema, append-only: add a new entry, never edit a shipped one. Times are unix ms.

export const controlMigrations: readonly string[] = [
  `
  CREATE TABLE runs (
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    repo TEXT,
    repo_path TEXT,
    group_id TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    brief TEXT,
    origin TEXT,
    provider TEXT,
    branch TEXT,
    pr_url TEXT,
    question TEXT,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    updated_at INTEGER NOT NULL,
    cost_usd REAL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    exit_code INTEGER,
    error TEXT,
    pid INTEGER,
    extra TEXT,
    PRIMARY KEY (source, run)
  ) STRICT;
  CREATE INDEX runs_by_start ON runs (started_at DESC, source DESC, run DESC);
  CREATE INDEX runs_by_verdict ON runs (verdict, started_at DESC, source DESC, run DESC);
  CREATE INDEX runs_by_repo ON runs (repo, started_at DESC, source DESC, run DESC);
  CREATE INDEX runs_by_group ON runs (group_id, started_at DESC, source DESC, run DESC);
  CREATE INDEX runs_by_status ON runs (status, started_at DESC);

  CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (source, run, seq)
  ) STRICT;
  CREATE INDEX events_by_run ON events (source, run, id);

  CREATE TABLE artifacts (
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    path TEXT NOT NULL,
    content_type TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (source, run, path)
  ) STRICT;

  CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    peer TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    outcome TEXT NOT NULL,
    detail TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
  ) STRICT;

  CREATE TABLE config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  ) STRICT;

  CREATE TABLE control_requests (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    action TEXT NOT NULL,
    payload TEXT,
    created_at INTEGER NOT NULL,
    delivered_at INTEGER
  ) STRICT;
  CREATE INDEX control_requests_pending ON control_requests (source, delivered_at, id);

  CREATE TABLE start_requests (
    request_id TEXT PRIMARY KEY,
    body_sha256 TEXT NOT NULL,
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT;

  CREATE TABLE notifications (
    id INTEGER PRIMARY KEY,
    source TEXT,
    run TEXT,
    job_id TEXT,
    origin TEXT NOT NULL,
    channel TEXT NOT NULL,
    target TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    message TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX notifications_by_time ON notifications (created_at DESC, id DESC);

  CREATE TABLE merge_queue (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT,
    added_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (source, run)
  ) STRICT;
  `,
  // 2: /v1/stats and /v1/stats/cost scan this covering index instead of the table (no row lookups at 1,000,000 runs);
  // notifications re-sent by the trigger server as delivery progresses upsert on (job_id, channel).
  `
  CREATE INDEX runs_stats ON runs (
    started_at, status, verdict, ended_at, provider, repo, cost_usd, tokens_in, tokens_out
  );
  CREATE UNIQUE INDEX notifications_by_job ON notifications (job_id, channel) WHERE job_id IS NOT NULL;
  `,
  // 3: each run's Run JSON text, kept with the row for GET /v1/runs (src/db/runs-store.ts); NULL means "not written
  // yet". Any UPDATE that names a public column, even plain SQL from any connection, drops it, so it is never stale.
  `
  ALTER TABLE runs ADD COLUMN json TEXT;
  CREATE INDEX runs_json_missing ON runs (started_at) WHERE json IS NULL;
  CREATE TRIGGER runs_json_stale AFTER UPDATE OF
    source, run, repo, group_id, status, verdict, brief, origin, provider, branch, pr_url, question,
    started_at, ended_at, updated_at, cost_usd, tokens_in, tokens_out, exit_code, error ON runs
  WHEN NEW.json IS NOT NULL AND NEW.json IS OLD.json
  BEGIN UPDATE runs SET json = NULL WHERE rowid = NEW.rowid; END;
  `,
  // 4: the projects the operator registered (POST /v1/import), and deleted runs, so re-shipping one does not bring it
  // back (src/db/control-stores.ts).
  `
  CREATE TABLE projects (
    path TEXT PRIMARY KEY,
    registered_at INTEGER NOT NULL
  ) STRICT;
  CREATE TABLE deleted_runs (
    source TEXT NOT NULL,
    run TEXT NOT NULL,
    deleted_at INTEGER NOT NULL,
    PRIMARY KEY (source, run)
  ) STRICT;
  `,
  // 5: the repositories each trigger server serves, as it last reported them (GET /v1/repos).
  `
  CREATE TABLE served_repos (
    source TEXT NOT NULL,
    name TEXT NOT NULL,
    reported_at INTEGER NOT NULL,
    PRIMARY KEY (source, name)
  ) STRICT;
  `,
  // 6: nothing backfills run JSON texts, so the partial index that found the missing ones only cost every write.
  `
  DROP INDEX runs_json_missing;
  `,
  // 7: why a run that did not succeed ended (the Run JSON's `failure`), and GET /v1/runs?failure=<class> on an index;
  // the trigger that drops a stale Run JSON text learns the new columns.
  `
  ALTER TABLE runs ADD COLUMN failure_class TEXT;
  ALTER TABLE runs ADD COLUMN failure_reason TEXT;
  ALTER TABLE runs ADD COLUMN failure_retryable INTEGER;
  CREATE INDEX runs_by_failure ON runs (failure_class, started_at DESC, source DESC, run DESC);
  UPDATE runs SET json = json_insert(json, '$.failure', json('null')) WHERE json IS NOT NULL;
  DROP TRIGGER runs_json_stale;
  CREATE TRIGGER runs_json_stale AFTER UPDATE OF
    source, run, repo, group_id, status, verdict, brief, origin, provider, branch, pr_url, question,
    started_at, ended_at, updated_at, cost_usd, tokens_in, tokens_out, exit_code, error,
    failure_class, failure_reason, failure_retryable ON runs
  WHEN NEW.json IS NOT NULL AND NEW.json IS OLD.json
  BEGIN UPDATE runs SET json = NULL WHERE rowid = NEW.rowid; END;
  `,
  // 8: a run's cost as its agent reported it and as the egress gate metered it (JSON texts, src/run-json.ts); the
  // stale-text trigger of 7 now names them too.
  `
  ALTER TABLE runs ADD COLUMN reported TEXT;
  ALTER TABLE runs ADD COLUMN metered TEXT;
  UPDATE runs SET json = json_insert(json, '$.reported', json('null'), '$.metered', json('null'))
    WHERE json IS NOT NULL;
  DROP TRIGGER runs_json_stale;
  CREATE TRIGGER runs_json_stale AFTER UPDATE OF
    source, run, repo, group_id, status, verdict, brief, origin, provider, branch, pr_url, question,
    started_at, ended_at, updated_at, cost_usd, tokens_in, tokens_out, exit_code, error,
    failure_class, failure_reason, failure_retryable, reported, metered ON runs
  WHEN NEW.json IS NOT NULL AND NEW.json IS OLD.json
  BEGIN UPDATE runs SET json = NULL WHERE rowid = NEW.rowid; END;
  `,
  // 9: the run's OpenTelemetry trace id (the Run JSON's `trace_id`, src/trace.ts); the stale-JSON trigger learns it.
  `
  ALTER TABLE runs ADD COLUMN trace_id TEXT;
  UPDATE runs SET json = json_insert(json, '$.trace_id', json('null')) WHERE json IS NOT NULL;
  DROP TRIGGER runs_json_stale;
  CREATE TRIGGER runs_json_stale AFTER UPDATE OF
    source, run, repo, group_id, status, verdict, brief, origin, provider, branch, pr_url, question,
    started_at, ended_at, updated_at, cost_usd, tokens_in, tokens_out, exit_code, error,
    failure_class, failure_reason, failure_retryable, reported, metered, trace_id ON runs
  WHEN NEW.json IS NOT NULL AND NEW.json IS OLD.json
  BEGIN UPDATE runs SET json = NULL WHERE rowid = NEW.rowid; END;
  `,
  // 10: a notification row belongs to the source whose batch reported it, and only that source updates it: on
  // (job_id, channel) alone one runner's report rewrote another's row. `source` stays the run's (NULL for a job
  // alone), so the reporter has its own column; an older row that names no run has none, and a later report of it
  // adds a row instead of updating it.
  `
  ALTER TABLE notifications ADD COLUMN reported_by TEXT;
  UPDATE notifications SET reported_by = source;
  DROP INDEX notifications_by_job;
  CREATE UNIQUE INDEX notifications_by_job ON notifications (reported_by, job_id, channel) WHERE job_id IS NOT NULL;
  `,
  // 11: the SHA-256 of the key each run's worker ships with it, kept on first sight so no other runner of the source
  // can write the run or take its control requests (src/control/ingest-apply.ts). Not in the Run JSON, so the
  // stale-JSON trigger does not name it; a deleted row takes it along.
  `
  ALTER TABLE runs ADD COLUMN run_key_sha256 BLOB;
  `,
  // 12: whether the run moved from the key handed to its worker onto the key that was made from (a pod's signer):
  // from then on its row is only that runner's (GET /v1/runs/:source/:run `key_moved`, ingest-apply.ts).
  `
  ALTER TABLE runs ADD COLUMN run_key_moved INTEGER NOT NULL DEFAULT 0;
  `,
  // 13: event ids only grow, across deletes and restarts (a stream resumes after the last id it sent). SQLite gives a
  // new row the largest id left plus one, so deleting the newest events (a run's DELETE, the retention sweep) handed
  // their ids out again. The largest id ever deleted is kept here, by trigger whoever deletes, and the events store
  // gives no new event an id at or below it (src/db/events-store.ts). AUTOINCREMENT was the other way: it rebuilds
  // the table (~9 µs an event, minutes at start on a large DB) and writes sqlite_sequence at every insert.
  `
  CREATE TABLE events_deleted_max (id INTEGER PRIMARY KEY CHECK (id = 1), max_id INTEGER NOT NULL) STRICT;
  INSERT INTO events_deleted_max VALUES (1, 0);
  CREATE TRIGGER events_keep_max AFTER DELETE ON events WHEN OLD.id > (SELECT max_id FROM events_deleted_max)
  BEGIN UPDATE events_deleted_max SET max_id = OLD.id WHERE id = 1; END;
  `,
  // 14: the time (unix ms) by which a remote run's runner must have ended it, set by the first batch carrying one that
  // is not a bound-runs token's (a pod's seal step: its Job's deadline plus grace); past it the Control Plane ends a
  // run still active (its pod died with no end shipped; src/control/main.ts endLapsedRuns). Not in the Run JSON, nor
  // indexed: the sweep reads the active runs through runs_by_status.
  `
  ALTER TABLE runs ADD COLUMN lease_until INTEGER;
  `,
];
