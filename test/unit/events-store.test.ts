import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryControlStores } from '../helpers/memory-stores.ts';
import { openDatabase } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { createControlStores } from '../../src/db/control-stores.ts';
import { EVENTS_SQL } from '../../src/db/events-store.ts';

describe('events store', () => {
  const { db, stores } = memoryControlStores();

  it('assigns increasing ids and ignores a repeated (source, run, seq)', () => {
    const a = stores.events.insert({ source: 's', run: 'r', seq: 1, ts: 10, kind: 'log', data: '{"text":"a"}' });
    const b = stores.events.insert({ source: 's', run: 'r', seq: 2, ts: 11, kind: 'log', data: '{"text":"b"}' });
    const dup = stores.events.insert({ source: 's', run: 'r', seq: 1, ts: 12, kind: 'log', data: '{"text":"changed"}' });
    assert.ok(a !== null && b !== null && b > a);
    assert.equal(dup, null);
    assert.equal(stores.events.listAll({ source: 's', run: 'r', after: 0, limit: 10 })[0]?.data, '{"text":"a"}');
  });

  it('gives server-originated events negative seqs that never collide with the runner', () => {
    const first = stores.events.append('s', 'r', { kind: 'answer', data: { answer: 'Postgres' }, ts: 20 });
    const second = stores.events.append('s', 'r', { kind: 'answer', data: { answer: 'again' }, ts: 21 });
    assert.equal(first.seq, -1);
    assert.equal(second.seq, -2);
    assert.equal(first.data, '{"answer":"Postgres"}');
    assert.notEqual(stores.events.insert({ source: 's', run: 'r', seq: 3, ts: 22, kind: 'log', data: '{}' }), null);
  });

  it('pages one run ascending by id after a cursor', () => {
    const all = stores.events.listAll({ source: 's', run: 'r', after: 0, limit: 100 });
    assert.deepEqual(all.map((e) => e.seq), [1, 2, -1, -2, 3]);
    const page = stores.events.listAll({ source: 's', run: 'r', after: all[1]!.id, limit: 2 });
    assert.deepEqual(page.map((e) => e.seq), [-1, -2]);
  });

  it('lists across runs and by source, and reports the highest id', () => {
    const other = stores.events.insert({ source: 't', run: 'x', seq: 1, ts: 30, kind: 'log', data: '{}' });
    assert.equal(stores.events.maxId(), other);
    assert.equal(stores.events.listAll({ after: 0, limit: 100 }).length, 6);
    assert.deepEqual(stores.events.listAll({ after: 0, limit: 100, source: 't' }).map((e) => e.run), ['x']);
    assert.equal(stores.events.listAll({ after: 0, limit: 100, source: 's', run: 'r' }).length, 5);
  });

  // Both indexes on events are needed (docs/bench-history.md, "one index on events"): a run's seq order is not its
  // id order (the page above), so without (source, run, id) a run's page and its latest status sort the whole run, and
  // without (source, run, seq) nothing finds a repeated seq but a scan. A source's events go by id from the cursor.
  it('reads a run by id, a source from its cursor and a seq each through its own index, never sorting', () => {
    const plan = (sql: string): string => db.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...[...sql.matchAll(/\?/g)].map(() => 's')).map((r) => (r as { detail: string }).detail).join('; ');
    const expected: Array<[string, RegExp]> = [
      [EVENTS_SQL.run, /USING INDEX events_by_run \(source=\? AND run=\? AND id>\?\)/],
      [EVENTS_SQL.latest, /USING INDEX events_by_run \(source=\? AND run=\?\)/],
      [EVENTS_SQL.source, /USING INTEGER PRIMARY KEY \(rowid>\?\)/],
      [EVENTS_SQL.any, /USING INTEGER PRIMARY KEY \(rowid>\?\)/],
      [EVENTS_SQL.minSeq, /USING COVERING INDEX sqlite_autoindex_events_1 \(source=\? AND run=\?\)/],
    ];
    for (const [sql, index] of expected) {
      assert.match(plan(sql), index);
      assert.doesNotMatch(plan(sql), /TEMP B-TREE/);
    }
  });
});

describe('event ids only grow, across deletes and restarts', () => {
  /** One ended run with `n` events; the id of its last one. */
  function stored(stores: ReturnType<typeof createControlStores>, run: string, n: number): number {
    stores.runs.upsert('s', { run, status: 'succeeded', started_at: 1_000, updated_at: 1_000 });
    let last = 0;
    for (let seq = 0; seq < n; seq++) {
      last = stores.events.insert({ source: 's', run, seq, ts: 1_000, kind: 'log', data: '{}' })!;
    }
    return last;
  }

  it('never hands out the id of a deleted event again, nor after a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-event-ids-'));
    try {
      const path = join(dir, 'control.db');
      // A database from before migration 13 that already holds events.
      const old = openDatabase(path, controlMigrations.slice(0, 12));
      old.prepare("INSERT INTO events (source, run, seq, ts, kind, data) VALUES ('s', 'r0', 0, 1, 'log', '{}')").run();
      old.close();
      let db = openDatabase(path, controlMigrations);
      let stores = createControlStores(db);
      stored(stores, 'r1', 3);
      const newest = stored(stores, 'r2', 3);
      // A run's DELETE takes the newest events along; a watcher holding `newest` must see the next one.
      assert.equal(stores.runs.delete('s', 'r2'), 'deleted');
      const next = stored(stores, 'r3', 2);
      assert.ok(next - 1 > newest, `${next - 1} after ${newest}`);
      assert.deepEqual(stores.events.listAll({ after: newest, limit: 10 }).map((e) => e.run), ['r3', 'r3']);
      // Deleted again (the retention sweep deletes the same way), then a restart.
      assert.equal(stores.runs.delete('s', 'r3'), 'deleted');
      db.close();
      db = openDatabase(path, controlMigrations);
      stores = createControlStores(db);
      const after = stored(stores, 'r4', 1);
      assert.ok(after > next, `${after} after ${next}`);
      assert.equal(stores.events.maxId(), after);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
