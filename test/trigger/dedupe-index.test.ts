// The dedupe keys' in-memory index (trigger-dedupe-store.ts): a delivery is a duplicate exactly when a committed
// row (from any connection) or a claim earlier in the same transaction holds one of its keys; hash collisions,
// deleted rows, rolled-back claims and DBs from before migration 4 never change that.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { dedupeHash } from '../../src/db/trigger-dedupe-store.ts';
import { placeBatch } from '../../src/trigger/queue-place.ts';
import { queueShares } from '../../src/trigger/queue-shares.ts';
import { pruneAll } from '../../src/trigger/retention.ts';
import type { EnqueueRequest } from '../../src/trigger/delivery.ts';
import { tempTriggerDbs } from './temp-dbs.ts';
import { tempDir } from './helpers.ts';

const temp = tempTriggerDbs('svc-dedupe-index-');

function delivery(...keys: string[]): EnqueueRequest {
  return { origin: 'jobs', repo: 'acme/api', brief: 'b', args: ['start', '--brief', 'b', '--detach'], dedupeKeys: keys };
}

function place(stores: TriggerStores, now: number, ...deliveries: EnqueueRequest[]): string[] {
  return placeBatch(stores, deliveries, now, queueShares(1_000_000, 1))
    .map((o) => (o.kind === 'queued' ? 'queued' : o.kind === 'duplicate' ? `dup:${o.jobId}` : o.kind));
}

function jobOf(stores: TriggerStores, key: string): string {
  return (stores.db.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?').get(key) as { job_id: string }).job_id;
}

/** Two different keys with the same 32-bit hash, found by a birthday search. */
function collidingPair(): [string, string] {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `webhook:delivery:${i.toString(36)}`;
    const other = seen.get(dedupeHash(key));
    if (other !== undefined) return [other, key];
    seen.set(dedupeHash(key), key);
  }
}

describe('dedupe keys without an index on the key', () => {
  it('finds a key committed by another connection, in a batch started after that commit', () => {
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    assert.deepEqual(place(stores, 1, delivery('a')), ['queued']);
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    assert.deepEqual(place(other, 2, delivery('b', 'c')), ['queued']);
    const expected = [`dup:${jobOf(stores, 'c')}`, `dup:${jobOf(stores, 'a')}`];
    assert.deepEqual(place(stores, 3, delivery('x', 'c'), delivery('a')), expected);
    assert.deepEqual(place(other, 4, delivery('a')), [`dup:${jobOf(stores, 'a')}`]);
    other.db.close();
  });

  it('tells apart two keys whose hashes collide', () => {
    const [k1, k2] = collidingPair();
    assert.notEqual(k1, k2);
    assert.equal(dedupeHash(k1), dedupeHash(k2));
    const stores = createTriggerStores(temp.open().db);
    assert.deepEqual(place(stores, 1, delivery(k1)), ['queued']);
    assert.deepEqual(place(stores, 2, delivery(k2)), ['queued']);
    const expected = [`dup:${jobOf(stores, k2)}`, `dup:${jobOf(stores, k1)}`];
    assert.deepEqual(place(stores, 3, delivery(k2), delivery(k1)), expected);
    assert.notEqual(jobOf(stores, k1), jobOf(stores, k2));
  });

  it('answers a key claimed earlier in the same batch as a duplicate, and a key twice in one delivery once', () => {
    const stores = createTriggerStores(temp.open().db);
    const out = place(stores, 1, delivery('p', 'p'), delivery('q', 'p'));
    assert.equal(out[0], 'queued');
    assert.equal(out[1], `dup:${jobOf(stores, 'p')}`);
    assert.equal((stores.db.prepare('SELECT count(*) AS n FROM dedupe_keys').get() as { n: number }).n, 1);
  });

  it('forgets expired keys: they are no longer duplicates and leave the index', () => {
    const stores = createTriggerStores(temp.open().db);
    const day = 86_400_000;
    place(stores, 0, delivery('old-1', 'old-2'));
    place(stores, 5 * day, delivery('new'));
    stores.dedupe.warm();
    assert.equal(stores.dedupe.indexed(), 3);
    assert.deepEqual(pruneAll(stores, { dedupeDays: 1, jobDays: 30 }, 5 * day), { dedupeKeys: 2, jobs: 0 });
    assert.equal(stores.dedupe.indexed(), 1);
    const expected = ['queued', `dup:${jobOf(stores, 'new')}`];
    assert.deepEqual(place(stores, 5 * day, delivery('old-1'), delivery('new')), expected);
  });

  it('never reuses a deleted key id, so a new key claimed elsewhere after all keys were deleted is still seen', () => {
    const { db, path } = temp.open();
    const stores = createTriggerStores(db);
    place(stores, 1, delivery('k1', 'k2'));
    stores.dedupe.warm();
    db.exec('DELETE FROM dedupe_keys');
    const other = createTriggerStores(openDatabase(path, triggerMigrations));
    assert.deepEqual(place(other, 2, delivery('k3')), ['queued']);
    assert.deepEqual(place(stores, 3, delivery('k3')), [`dup:${jobOf(stores, 'k3')}`]);
    other.db.close();
  });

  it('keeps the keys of a DB from before migration 4, and they still deduplicate', () => {
    const dir = tempDir('svc-dedupe-v3-');
    temp.dirs.push(dir);
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
    assert.deepEqual(place(stores, 3, ...again), ['dup:j1', 'dup:j1', 'queued']);
    // The foreign key still cascades: deleting the job deletes its keys.
    db.exec("DELETE FROM jobs WHERE id = 'j1'");
    assert.deepEqual(place(stores, 4, delivery('webhook:delivery:d1')), ['queued']);
  });
});
