import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { userVersion, DatabaseTooNewError } from '../../src/db/open.ts';
import { buildListQuery, createRunsStore } from '../../src/db/runs-store.ts';
import { createNotificationsStore } from '../../src/db/notifications-store.ts';

describe('control migrations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('applies every migration to a fresh file and records user_version', () => {
    const db = openDatabase(join(dir, 'a.db'), controlMigrations);
    assert.equal(userVersion(db), controlMigrations.length);
    const tables = (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name);
    for (const t of ['runs', 'events', 'artifacts', 'audit', 'config', 'control_requests', 'notifications']) assert.ok(tables.includes(t), t);
    db.close();
  });

  it('opens an up-to-date file again without changing it', () => {
    const path = join(dir, 'a.db');
    const db = openDatabase(path, controlMigrations);
    db.prepare("INSERT INTO runs (source, run, group_id, status, started_at, updated_at) VALUES ('s', 'r', 'r', 'queued', 1, 1)").run();
    db.close();
    const again = openDatabase(path, controlMigrations);
    assert.equal(userVersion(again), controlMigrations.length);
    assert.equal((again.prepare('SELECT count(*) AS n FROM runs').get() as { n: number }).n, 1);
    again.close();
  });

  it('applies only the missing migrations to an older file', () => {
    const path = join(dir, 'b.db');
    openDatabase(path, controlMigrations.slice(0, 1)).close();
    const db = openDatabase(path, controlMigrations);
    assert.equal(userVersion(db), controlMigrations.length);
    db.close();
  });

  it('gives runs of a file from before failure classes and metering a failure and costs of null, filters on an index, keeps the text fresh', () => {
    const path = join(dir, 'd.db');
    const old = openDatabase(path, controlMigrations.slice(0, 6));
    old.prepare(`INSERT INTO runs (source, run, group_id, status, started_at, updated_at, error, json)
      VALUES ('s', 'r1', 'r1', 'failed', 1, 1, 'boom', '{"source":"s","run":"r1","status":"failed","error":"boom"}')`).run();
    old.close();
    const db = openDatabase(path, controlMigrations);
    const runs = createRunsStore(db);
    const [text] = runs.page({ limit: 5 }).items;
    // Control migrations 8 and 9 give the same stored text costs and a trace_id of null.
    assert.deepEqual(JSON.parse(text!), {
      source: 's', run: 'r1', status: 'failed', error: 'boom', failure: null, reported: null, metered: null,
      trace_id: null,
    });
    // A class set afterwards drops the stored text (the trigger knows the new columns), so the list never serves it stale.
    db.prepare("UPDATE runs SET failure_class = 'infra', failure_reason = 'gate', failure_retryable = 1").run();
    assert.deepEqual(JSON.parse(runs.page({ limit: 5 }).items[0]!).failure, { class: 'infra', reason: 'gate', retryable: true });
    assert.deepEqual(runs.page({ limit: 5, failure_class: 'infra' }).items.length, 1);
    // So does a metered cost set afterwards.
    db.prepare(`UPDATE runs SET metered = '{"cost_usd":0.4,"tokens_in":1,"tokens_out":2,"calls":1,"unpriced":0,"unknown":0}'`).run();
    assert.equal(JSON.parse(runs.page({ limit: 5 }).items[0]!).metered.cost_usd, 0.4);
    const { sql, args } = buildListQuery({ limit: 5, failure_class: 'infra' });
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args).map((r) => (r as { detail: string }).detail).join('; ');
    assert.match(plan, /USING INDEX runs_by_failure/);
    assert.doesNotMatch(plan, /TEMP B-TREE/);
    db.close();
  });

  it('gives notification rows of a file from before the reporter column their run\'s source as reporter', () => {
    const path = join(dir, 'notifications.db');
    const before = controlMigrations.findIndex((m) => m.includes('reported_by'));
    const old = openDatabase(path, controlMigrations.slice(0, before));
    old.exec(`INSERT INTO notifications (job_id, source, run, origin, channel, status, created_at, updated_at)
      VALUES ('j1', 'k8s', 'r1', 'chata', 'reply', 'pending', 1, 1),
        ('j2', NULL, NULL, 'chata', 'reply', 'pending', 1, 1)`);
    old.close();
    const db = openDatabase(path, controlMigrations);
    const notifications = createNotificationsStore(db);
    const report = (job_id: string, source: string | null) => ({
      job_id, source, run: source && 'r1', origin: 'chata', channel: 'reply', target: null, status: 'sent' as const,
      attempts: 1, error: null, created_at: 1, updated_at: 2,
    });
    notifications.ingest('k8s', [report('j1', 'k8s')]);
    notifications.ingest('ci', [report('j1', 'ci')]);
    // A row that named no run has no known reporter: a later report of it is a row of its own.
    notifications.ingest('k8s', [report('j2', null)]);
    const rows = db.prepare('SELECT job_id, reported_by, status FROM notifications ORDER BY id').all();
    assert.deepEqual(rows.map((r) => ({ ...r })), [
      { job_id: 'j1', reported_by: 'k8s', status: 'sent' },
      { job_id: 'j2', reported_by: null, status: 'pending' },
      { job_id: 'j1', reported_by: 'ci', status: 'sent' },
      { job_id: 'j2', reported_by: 'k8s', status: 'sent' },
    ]);
    db.close();
  });

  it('refuses a database written by a newer svc', () => {
    const path = join(dir, 'c.db');
    const raw = new DatabaseSync(path);
    raw.exec(`PRAGMA user_version = ${controlMigrations.length + 1}`);
    raw.close();
    assert.throws(() => openDatabase(path, controlMigrations), (err: unknown) => err instanceof DatabaseTooNewError && err.code === 'refused');
  });
});
