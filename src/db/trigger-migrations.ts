// Trigger server schema, append-only: add a new entry, never edit a shipped one. Times are unix ms.

export const triggerMigrations: readonly string[] = [
  `
  CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    origin TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')),
    brief TEXT NOT NULL,
    args TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    run_source TEXT,
    run_id TEXT,
    exit_code INTEGER,
    summary TEXT,
    error TEXT
  ) STRICT;
  CREATE INDEX jobs_by_status ON jobs (status, created_at, id);

  CREATE TABLE dedupe_keys (
    key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);

  CREATE TABLE reply_targets (
    job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    notify_status TEXT CHECK (notify_status IN ('sent', 'failed', 'skipped')),
    notified_at INTEGER
  ) STRICT;
  `,
  // Counting queued rows on every delivery is O(queue depth); triggers keep the counts exact and O(1).
  `
  CREATE TABLE job_counts (
    status TEXT PRIMARY KEY,
    n INTEGER NOT NULL
  ) STRICT;
  INSERT INTO job_counts (status, n)
    SELECT s.status, (SELECT count(*) FROM jobs WHERE jobs.status = s.status)
    FROM (
      SELECT 'queued' AS status UNION ALL SELECT 'running' UNION ALL SELECT 'succeeded'
      UNION ALL SELECT 'failed' UNION ALL SELECT 'interrupted'
    ) AS s;
  CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
    UPDATE job_counts SET n = n + 1 WHERE status = NEW.status;
  END;
  CREATE TRIGGER jobs_count_update AFTER UPDATE OF status ON jobs WHEN OLD.status <> NEW.status BEGIN
    UPDATE job_counts SET n = n - 1 WHERE status = OLD.status;
    UPDATE job_counts SET n = n + 1 WHERE status = NEW.status;
  END;
  CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1 WHERE status = OLD.status;
  END;
  `,
  // 3: retention (src/trigger/retention.ts) walks expired dedupe keys by age and finished jobs by end time.
  `
  CREATE INDEX dedupe_keys_by_created ON dedupe_keys (created_at);
  CREATE INDEX jobs_by_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
  `,
  // 4: dedupe keys found through an in-memory index: no B-tree on the random key; AUTOINCREMENT ids only grow.
  `
  CREATE TABLE dedupe_keys_v4 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO dedupe_keys_v4 (key, job_id, created_at)
    SELECT key, job_id, created_at FROM dedupe_keys ORDER BY created_at, rowid;
  DROP TABLE dedupe_keys;
  ALTER TABLE dedupe_keys_v4 RENAME TO dedupe_keys;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);
  CREATE INDEX dedupe_keys_by_created ON dedupe_keys (created_at);
  `,
  // 5: each origin's queued count in O(1) for the queue shares (a newer origin gets its row at start); no index by
  // origin, which cost every commit. summary_parts: the summary as parts, so each vendor fences agent text.
  `
  CREATE TABLE queued_by_origin (
    origin TEXT PRIMARY KEY,
    n INTEGER NOT NULL
  ) STRICT;
  INSERT INTO queued_by_origin (origin, n)
    SELECT o.origin, (SELECT count(*) FROM jobs WHERE jobs.status = 'queued' AND jobs.origin = o.origin)
    FROM (SELECT 'errtrack' AS origin UNION ALL SELECT 'chata' UNION ALL SELECT 'trackera' UNION ALL SELECT 'trackerb'
      UNION ALL SELECT 'chatb' UNION ALL SELECT 'webhook' UNION ALL SELECT 'jobs') AS o;
  CREATE TRIGGER jobs_queued_insert AFTER INSERT ON jobs WHEN NEW.status = 'queued' BEGIN
    UPDATE queued_by_origin SET n = n + 1 WHERE origin = NEW.origin;
  END;
  CREATE TRIGGER jobs_queued_enter AFTER UPDATE OF status ON jobs
    WHEN NEW.status = 'queued' AND OLD.status <> 'queued' BEGIN
    UPDATE queued_by_origin SET n = n + 1 WHERE origin = NEW.origin;
  END;
  CREATE TRIGGER jobs_queued_leave AFTER UPDATE OF status ON jobs
    WHEN OLD.status = 'queued' AND NEW.status <> 'queued' BEGIN
    UPDATE queued_by_origin SET n = n - 1 WHERE origin = OLD.origin;
  END;
  CREATE TRIGGER jobs_queued_delete AFTER DELETE ON jobs WHEN OLD.status = 'queued' BEGIN
    UPDATE queued_by_origin SET n = n - 1 WHERE origin = OLD.origin;
  END;
  ALTER TABLE jobs ADD COLUMN summary_parts TEXT;
  `,
  // 6: one server, many repositories: the repository a job was routed to, and where its `svc start` ran (a restart
  // re-attaches there). No index on repo: it would cost every delivery's commit.
  `
  ALTER TABLE jobs ADD COLUMN repo TEXT;
  ALTER TABLE jobs ADD COLUMN workdir TEXT;
  `,
  // 7: dedupe keys found by their primary key (a key held twice keeps its first claim).
  `
  CREATE TABLE dedupe_keys_v7 (
    key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT, WITHOUT ROWID;
  INSERT OR IGNORE INTO dedupe_keys_v7 (key, job_id, created_at)
    SELECT key, job_id, created_at FROM dedupe_keys ORDER BY id;
  DROP TABLE dedupe_keys;
  ALTER TABLE dedupe_keys_v7 RENAME TO dedupe_keys;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);
  CREATE INDEX dedupe_keys_by_created ON dedupe_keys (created_at);
  `,
  // 8: the audit of answers that came in from where a job was asked (src/trigger/answers.ts).
  `
  CREATE TABLE answers (
    id INTEGER PRIMARY KEY,
    job_id TEXT REFERENCES jobs (id) ON DELETE CASCADE,
    origin TEXT NOT NULL,
    place TEXT NOT NULL,
    who TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('answered', 'refused')),
    reason TEXT,
    at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX answers_by_job ON answers (job_id);
  `,
  // 9: how many times a job's run was started over after an infra failure (the job itself is never retried).
  `
  ALTER TABLE jobs ADD COLUMN infra_retries INTEGER NOT NULL DEFAULT 0;
  `,
  // 10: dedupe keys found through the in-memory index again, as in 4 (docs/bench.md).
  `
  CREATE TABLE dedupe_keys_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO dedupe_keys_new (key, job_id, created_at)
    SELECT key, job_id, created_at FROM dedupe_keys ORDER BY created_at;
  DROP TABLE dedupe_keys;
  ALTER TABLE dedupe_keys_new RENAME TO dedupe_keys;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);
  CREATE INDEX dedupe_keys_by_created ON dedupe_keys (created_at);
  `,
  // 11: a job's span as a W3C traceparent, which its run continues, and its delivery's span id (job-trace.ts).
  `
  ALTER TABLE jobs ADD COLUMN traceparent TEXT;
  ALTER TABLE jobs ADD COLUMN trace_parent TEXT;
  `,
  // 12: one dedupe row per claim, its keys as a JSON array; a queued job counted by the jobs store once per COMMIT,
  // not by an insert trigger (docs/bench.md).
  `
  DROP TRIGGER jobs_count_insert;
  DROP TRIGGER jobs_queued_insert;
  CREATE TABLE dedupe_keys_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    keys TEXT NOT NULL CHECK (json_valid(keys)),
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO dedupe_keys_new (keys, job_id, created_at)
    SELECT json_array(key), job_id, created_at FROM dedupe_keys ORDER BY id;
  DROP TABLE dedupe_keys;
  ALTER TABLE dedupe_keys_new RENAME TO dedupe_keys;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);
  CREATE INDEX dedupe_keys_by_created ON dedupe_keys (created_at);
  `,
  // 13: the run id the server chose for a job's launch (`svc start --run-id`), stored before the launcher starts, and
  // the launcher's process identity (JSON: pid, pgid, proc_start) once it runs: a restart during the launch ends that
  // launcher, then follows the run it made (job-loop.ts recover).
  `
  ALTER TABLE jobs ADD COLUMN launch_run TEXT;
  ALTER TABLE jobs ADD COLUMN launcher TEXT;
  `,
  // 14: a job's reply target (where its progress and summary go, and whether the summary went) in its own row, written
  // by the job's INSERT: a table of its own was one more row, key and foreign-key check per delivery (docs/bench.md).
  `
  ALTER TABLE jobs ADD COLUMN reply_channel TEXT;
  ALTER TABLE jobs ADD COLUMN reply_target TEXT;
  ALTER TABLE jobs ADD COLUMN notify_status TEXT CHECK (notify_status IN ('sent', 'failed', 'skipped'));
  ALTER TABLE jobs ADD COLUMN notified_at INTEGER;
  UPDATE jobs SET (reply_channel, reply_target, notify_status, notified_at) =
    (SELECT channel, target, notify_status, notified_at FROM reply_targets WHERE job_id = jobs.id)
    WHERE id IN (SELECT job_id FROM reply_targets);
  DROP TABLE reply_targets;
  `,
  // 15: no index of the claims' times and no JSON check per claim (only the dedupe store writes its keys): retention
  // reads the oldest claims by row id, which grows with time, so each claim is one B-tree write fewer (docs/bench.md).
  // The sequence is carried over: a row id is never used twice.
  // A job's status checks as comparisons: SQLite builds a temporary B-tree for an IN list of more than two values on
  // every INSERT and status UPDATE (docs/bench.md). The same test, so no row changes: the table's text is edited in
  // place, as SQLite's ALTER TABLE page ("other kinds of table schema changes") allows for a constraint; the DDL after
  // it bumps the schema version.
  `
  PRAGMA writable_schema = ON;
  UPDATE sqlite_schema SET sql = replace(replace(sql,
      'CHECK (status IN (''queued'', ''running'', ''succeeded'', ''failed'', ''interrupted''))',
      'CHECK (status = ''queued'' OR status = ''running'' OR status = ''succeeded'' OR status = ''failed'' OR '
        || 'status = ''interrupted'')'),
      'CHECK (notify_status IN (''sent'', ''failed'', ''skipped''))',
      'CHECK (notify_status = ''sent'' OR notify_status = ''failed'' OR notify_status = ''skipped'')')
    WHERE type = 'table' AND name = 'jobs';
  PRAGMA writable_schema = RESET;
  CREATE TABLE dedupe_keys_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    keys TEXT NOT NULL,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO dedupe_keys_new (id, keys, job_id, created_at) SELECT id, keys, job_id, created_at FROM dedupe_keys;
  DELETE FROM sqlite_sequence WHERE name = 'dedupe_keys_new';
  INSERT INTO sqlite_sequence (name, seq) SELECT 'dedupe_keys_new', seq FROM sqlite_sequence WHERE name = 'dedupe_keys';
  DROP TABLE dedupe_keys;
  ALTER TABLE dedupe_keys_new RENAME TO dedupe_keys;
  CREATE INDEX dedupe_keys_by_job ON dedupe_keys (job_id);
  `,
  // 16: how many times a job was queued again after a restart found its lost launch had made no run (job-loop.ts).
  `
  ALTER TABLE jobs ADD COLUMN requeues INTEGER NOT NULL DEFAULT 0;
  `,
];
