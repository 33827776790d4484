// Trigger server schema, append-only: add a new entry, never edit a shipped one. Times are unix ms.
import type { Migration } from './migrate.ts';

export const triggerMigrations: readonly Migration[] = [
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
];
