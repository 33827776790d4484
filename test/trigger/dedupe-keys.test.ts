// Dedupe keys (trigger-dedupe-store.ts, an in-memory index over an append-only table of claims): a delivery is a
// duplicate exactly when a committed row (from any connection) holds one of its keys; expired keys, a rolled-back
// delivery and DBs from before migrations 4, 7, 10 and 12 never change that.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { createJobQueue } from '../../src/trigger/queue.ts';
import type { EnqueueRequest } from '../../src/trigger/queue.ts';
import { tempTriggerDbs } from './temp-dbs.ts';
import { insertJob, pruneAll, rowCount, tempDir } from './helpers.ts';

const temp = tempTriggerDbs('svc-dedupe-keys-');

function delivery(...keys: string[]): EnqueueRequest {
  return { origin: 'jobs', repo: 'acme/api', brief: 'b', args: ['start', '--brief', 'b', '--detach'], dedupeKeys: keys };
}

/** The deliveries in one group commit (one event-loop turn), as each was answered. */
async function place(stores: TriggerStores, now: number, ...deliveries: EnqueueRequest[]): Promise<string[]> {
  const queue = createJobQueue({ stores, clock: () => now, maxQueued: 1_000_000, onEnqueued() {} });
  return (await Promise.all(deliveries.map((d) => queue.enqueue(d))))
    .map((o) => (o.kind === 'queued' ? 'queued' : o.kind === 'duplicate' ? `dup:${o.jobId}` : o.kind));
}

/** The claims' keys, one row each (a claim holds its keys as a JSON array). */
const KEYS = 'SELECT d.id, j.value AS key, d.job_id FROM dedupe_keys d, json_each(d.keys) j';

function jobOf(stores: TriggerStores, key: string): string {
  return (stores.db.prepare(`${KEYS} WHERE j.value = ?`).get(key) as { job_id: string }).job_id;
}

/** One committed delivery ('a'), then `keys` claimed for job jgone in a transaction still open (to roll back). */
async function claimInTransaction(stores: TriggerStores, ...keys: string[]): Promise<void> {
  assert.deepEqual(await place(stores, 1, delivery('a')), ['queued']);
  stores.db.exec('BEGIN IMMEDIATE');
  stores.dedupe.catchUp();
  insertJob(stores, { id: 'jgone', origin: 'jobs', repo: 'acme/api', brief: 'b', args: [], created_at: 2 });
  assert.equal(stores.dedupe.claim(keys, 'jgone', 2), undefined);
}

function keyCount(stores: TriggerStores): number {
  return (stores.db.prepare(`SELECT count(*) AS n FROM (${KEYS})`).get() as { n: number }).n;
}

describe('dedupe keys', async () => {
  it('finds a key another connection committed', async () => {
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    assert.deepEqual(await place(stores, 1, delivery('a')), ['queued']);
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    assert.deepEqual(await place(other, 2, delivery('b', 'c')), ['queued']);
    const expected = [`dup:${jobOf(stores, 'c')}`, `dup:${jobOf(stores, 'a')}`];
    assert.deepEqual(await place(stores, 3, delivery('x', 'c'), delivery('a')), expected);
    assert.deepEqual(await place(other, 4, delivery('a')), [`dup:${jobOf(stores, 'a')}`]);
    other.db.close();
  });

  it('claims a key twice in one delivery once, and a later delivery in the same commit is its duplicate', async () => {
    const stores = createTriggerStores(temp.open().db);
    const out = await place(stores, 1, delivery('p', 'p'), delivery('q', 'p'));
    assert.deepEqual(out, ['queued', `dup:${jobOf(stores, 'p')}`]);
    assert.equal(rowCount(stores.db, 'dedupe_keys'), 1);
  });

  it('never counts a rolled-back claim, even once a later key took its row id', async () => {
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    await claimInTransaction(stores, 'r');
    assert.equal(stores.dedupe.holder(['r']), 'jgone');
    const idOf = (key: string) => (db.prepare(`${KEYS} WHERE j.value = ?`).get(key) as { id: number }).id;
    const rolledBack = idOf('r');
    stores.db.exec('ROLLBACK');
    assert.equal(stores.dedupe.holder(['r']), undefined);
    // AUTOINCREMENT's counter rolled back too: the next key gets the id 'r' had.
    assert.deepEqual(await place(stores, 3, delivery('s')), ['queued']);
    assert.equal(idOf('s'), rolledBack);
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    assert.deepEqual(await place(stores, 4, delivery('r'), delivery('s')), ['queued', `dup:${jobOf(stores, 's')}`]);
    assert.deepEqual(await place(other, 5, delivery('r'), delivery('s')), [`dup:${jobOf(stores, 'r')}`,
      `dup:${jobOf(stores, 's')}`]);
    other.db.close();
  });

  it('reads back the rows another connection wrote after a rolled-back claim, at its row id and before it', async () => {
    // The catch-up skips a connection's own committed claims; a claim that rolled back is no such row, even once
    // another connection's key took its id.
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    await claimInTransaction(stores, 'r1', 'r2');
    stores.db.exec('ROLLBACK');
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    assert.deepEqual(await place(other, 3, delivery('t1', 't2', 't3')), ['queued']);
    const replayed = [delivery('t1'), delivery('t2'), delivery('t3'), delivery('r2')];
    const holder = `dup:${jobOf(other, 't1')}`;
    assert.deepEqual(await place(stores, 4, ...replayed), [holder, holder, holder, 'queued']);
    other.db.close();
  });

  it('forgets expired keys: they are no longer duplicates', async () => {
    const stores = createTriggerStores(temp.open().db);
    const day = 86_400_000;
    await place(stores, 0, delivery('old-1', 'old-2'));
    await place(stores, 5 * day, delivery('new'));
    assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 30 }, 5 * day), { dedupeKeys: 2, jobs: 0 });
    assert.equal(rowCount(stores.db, 'dedupe_keys'), 1);
    assert.deepEqual(await place(stores, 5 * day, delivery('old-1'), delivery('new')), ['queued', `dup:${jobOf(stores, 'new')}`]);
  });

  // Retention reads the claims by row id: one dated later than those after it (the clock stepped back) stays in
  // each window, and a claim the sweep has not reached keeps its job (no cascade past the index).
  describe('claims dated out of order', () => {
    const day = 86_400_000;
    /** `n` claims of one key each from id `from`, dated `at`, each with its job finished then. */
    function claims(stores: TriggerStores, from: number, n: number, at: number): void {
      const job = stores.db.prepare(`INSERT INTO jobs (id, origin, status, brief, args, created_at, finished_at)
        VALUES (?, 'jobs', 'succeeded', 'b', '[]', ?, ?)`);
      const claim = stores.db.prepare('INSERT INTO dedupe_keys (keys, job_id, created_at) VALUES (?, ?, ?)');
      for (let i = from; i < from + n; i++) {
        job.run(`j${i}`, at, at);
        claim.run(JSON.stringify([`k${i}`]), `j${i}`, at);
      }
      stores.dedupe.catchUp();
    }

    it('sweeps every expired claim, then their jobs, past one claim dated later', async () => {
      const stores = createTriggerStores(temp.open().db);
      claims(stores, 0, 1, 10 * day);
      claims(stores, 1, 1200, 0);
      assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 1 }, 5 * day), { dedupeKeys: 1200, jobs: 1200 });
      assert.equal(rowCount(stores.db, 'dedupe_keys'), 1);
      assert.equal(rowCount(stores.db, 'jobs'), 1);
      assert.deepEqual(await place(stores, 5 * day, delivery('k0'), delivery('k1')), ['dup:j0', 'queued']);
    });

    it('keeps an expired claim behind a full window of later ones, and its job with it', () => {
      const stores = createTriggerStores(temp.open().db);
      claims(stores, 0, 500, 10 * day);
      claims(stores, 500, 10, 0);
      assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 1 }, 5 * day), { dedupeKeys: 0, jobs: 0 });
      assert.equal(rowCount(stores.db, 'dedupe_keys'), 510);
      assert.equal(rowCount(stores.db, 'jobs'), 510);
    });
  });

  it('finds each of thousands of keys and none pruned, as the index grows and is rebuilt', async () => {
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    const day = 86_400_000;
    const keys = (prefix: string, n: number) => [`${prefix}-body-${n}`, `${prefix}-delivery-${n}`];
    const many = (prefix: string) => Array.from({ length: 1500 }, (_, n) => delivery(...keys(prefix, n)));
    await place(stores, 0, ...many('old'));
    await place(stores, 5 * day, ...many('new'));
    assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 30 }, 5 * day), { dedupeKeys: 3000, jobs: 0 });
    // More claims after the removals: the index is rebuilt without them.
    await place(stores, 5 * day, ...many('later'));
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    for (const store of [stores, other]) {
      for (let n = 0; n < 1500; n++) {
        assert.equal(store.dedupe.holder(keys('old', n)), undefined);
        for (const key of [...keys('new', n), ...keys('later', n)]) {
          assert.equal(store.dedupe.holder([key]), jobOf(stores, key));
        }
      }
    }
    other.db.close();
  });

  it('keeps the keys of a DB from before migrations 4 and 7, and they still deduplicate', async () => {
    const dir = tempDir('svc-dedupe-v3-');
    const path = join(dir, 'trigger.db');
    const v3 = openDatabase(path, triggerMigrations.slice(0, 3));
    v3.exec(`INSERT INTO jobs (id, origin, status, brief, args, created_at)
      VALUES ('j1', 'jobs', 'queued', 'b', '[]', 1)`);
    v3.exec(`INSERT INTO dedupe_keys (key, job_id, created_at)
      VALUES ('webhook:body:aa', 'j1', 1), ('webhook:delivery:d1', 'j1', 2)`);
    v3.close();
    const raw = new DatabaseSync(path);
    assert.equal((raw.prepare('PRAGMA user_version').get() as { user_version: number }).user_version, 3);
    raw.close();
    const db = openDatabase(path, triggerMigrations);
    temp.dbs.push(db);
    const stores = createTriggerStores(db);
    const again = [delivery('webhook:delivery:d1'), delivery('webhook:body:aa'), delivery('webhook:body:bb')];
    assert.deepEqual(await place(stores, 3, ...again), ['dup:j1', 'dup:j1', 'queued']);
    // The foreign key still cascades: deleting the job deletes its keys.
    db.exec("DELETE FROM jobs WHERE id = 'j1'");
    assert.deepEqual(await place(stores, 4, delivery('webhook:delivery:d1')), ['queued']);
  });

  it('migrates an append-only table that held a key twice, keeping the first claim', async () => {
    const dir = tempDir('svc-dedupe-v6-');
    const path = join(dir, 'trigger.db');
    const v6 = openDatabase(path, triggerMigrations.slice(0, 6));
    v6.exec(`INSERT INTO jobs (id, origin, status, brief, args, created_at)
      VALUES ('j1', 'jobs', 'queued', 'b', '[]', 1), ('j2', 'jobs', 'queued', 'b', '[]', 2)`);
    v6.exec(`INSERT INTO dedupe_keys (key, job_id, created_at) VALUES ('k', 'j1', 1), ('k', 'j2', 2)`);
    v6.close();
    const db = openDatabase(path, triggerMigrations);
    temp.dbs.push(db);
    const stores = createTriggerStores(db);
    assert.equal(rowCount(stores.db, 'dedupe_keys'), 1);
    assert.deepEqual(await place(stores, 3, delivery('k')), ['dup:j1']);
  });

  it('migrates the per-key rows of a DB from before migration 12 to claims, each key still a duplicate', async () => {
    const dir = tempDir('svc-dedupe-v11-');
    const path = join(dir, 'trigger.db');
    const v11 = openDatabase(path, triggerMigrations.slice(0, 11));
    v11.exec(`INSERT INTO jobs (id, origin, status, brief, args, created_at)
      VALUES ('j1', 'jobs', 'queued', 'b', '[]', 1), ('j2', 'jobs', 'queued', 'b', '[]', 2)`);
    v11.exec(`INSERT INTO dedupe_keys (key, job_id, created_at)
      VALUES ('k1', 'j1', 1), ('k2', 'j1', 1), ('k3', 'j2', 2)`);
    v11.close();
    const db = openDatabase(path, triggerMigrations);
    temp.dbs.push(db);
    const stores = createTriggerStores(db);
    assert.equal(keyCount(stores), 3);
    assert.deepEqual(await place(stores, 3, delivery('k2'), delivery('new', 'k3'), delivery('k1')),
      ['dup:j1', 'dup:j2', 'dup:j1']);
    // Retention still counts keys, and a pruned key is no longer a duplicate.
    assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 30 }, 86_400_000 + 3), { dedupeKeys: 3, jobs: 0 });
    assert.deepEqual(await place(stores, 86_400_000 + 3, delivery('k1')), ['queued']);
  });

  /** A DB at version 14 with claims 1 and 3 of 4 left (a failed delivery's deleted: a gap and the newest). */
  function v14(): Db {
    const dir = tempDir('svc-dedupe-v14-');
    const path = join(dir, 'trigger.db');
    const old = openDatabase(path, triggerMigrations.slice(0, 14));
    old.exec(`INSERT INTO jobs (id, origin, status, brief, args, created_at)
      VALUES ('j1', 'jobs', 'queued', 'b', '[]', 1), ('j2', 'jobs', 'succeeded', 'b', '[]', 2)`);
    old.exec(`INSERT INTO dedupe_keys (keys, job_id, created_at) VALUES ('["k1"]', 'j1', 1), ('["k2"]', 'j2', 2),
      ('["k3"]', 'j2', 3), ('["k4"]', 'j2', 4)`);
    old.exec('DELETE FROM dedupe_keys WHERE id IN (2, 4)');
    old.close();
    const db = openDatabase(path, triggerMigrations);
    temp.dbs.push(db);
    return db;
  }

  it('keeps every claim, its row id and the sequence past migration 15, which leaves a claim one index', async () => {
    const db = v14();
    const stores = createTriggerStores(db);
    const indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'dedupe_keys'";
    assert.deepEqual(db.prepare(indexes).all().map((r) => r.name), ['dedupe_keys_by_job']);
    assert.deepEqual(db.prepare('SELECT id, keys FROM dedupe_keys ORDER BY id').all().map((r) => [r.id, r.keys]),
      [[1, '["k1"]'], [3, '["k3"]']]);
    assert.deepEqual(await place(stores, 5, delivery('k3'), delivery('k1'), delivery('k2'), delivery('k4')),
      ['dup:j2', 'dup:j1', 'queued', 'queued']);
    // Row ids 2 and 4 are never given again.
    assert.deepEqual(db.prepare('SELECT id FROM dedupe_keys ORDER BY id').all().map((r) => r.id), [1, 3, 5, 6]);
    const jobsSql = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'jobs'").get() as { sql: string };
    assert.doesNotMatch(jobsSql.sql, /IN \(/);
    assert.match(jobsSql.sql, /status = 'interrupted'/);
    assert.deepEqual(db.prepare('PRAGMA integrity_check').all().map((r) => r.integrity_check), ['ok']);
  });

});
