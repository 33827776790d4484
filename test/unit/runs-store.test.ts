import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { memoryControlStores } from '../helpers/memory-stores.ts';
import { buildListQuery } from '../../src/db/runs-store.ts';
import type { RunFilter, RunInput } from '../../src/db/run-types.ts';

function run(i: number, fields: Partial<RunInput> = {}): RunInput {
  return { run: `r${i}`, status: 'succeeded', started_at: 1_000 + i, updated_at: 1_000 + i, repo: 'acme/api', verdict: 'verified', ...fields };
}

function plan(db: Db, filter: RunFilter): string {
  const { sql, args } = buildListQuery(filter);
  const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>;
  return rows.map((r) => r.detail).join(' | ');
}

describe('runs store', () => {
  const { stores } = memoryControlStores();

  it('inserts a run with group_id defaulting to its own id and reads it back', () => {
    stores.runs.upsert('local', run(1, { brief: 'fix it' }));
    const row = stores.runs.get('local', 'r1');
    assert.equal(row?.group_id, 'r1');
    assert.equal(row?.brief, 'fix it');
    assert.equal(row?.cost_usd, null);
  });

  it('upserts newer state and ignores an older updated_at', () => {
    stores.runs.upsert('local', run(2, { status: 'running', updated_at: 5_000 }));
    stores.runs.upsert('local', run(2, { status: 'succeeded', updated_at: 6_000 }));
    assert.equal(stores.runs.get('local', 'r2')?.status, 'succeeded');
    stores.runs.upsert('local', run(2, { status: 'running', updated_at: 5_500 }));
    assert.equal(stores.runs.get('local', 'r2')?.status, 'succeeded');
  });

  it('keeps the internal repo_path when a later upsert omits it', () => {
    stores.runs.upsert('local', run(3, { repo_path: '/work/p', updated_at: 1 }));
    stores.runs.upsert('local', run(3, { updated_at: 2 }));
    assert.equal(stores.runs.get('local', 'r3')?.repo_path, '/work/p');
  });

  it('keeps the first-seen started_at when a later upsert stamps another start time', () => {
    stores.runs.upsert('local', run(4, { status: 'queued', started_at: 7_000, updated_at: 7_000 }));
    stores.runs.upsert('local', run(4, { status: 'running', started_at: 7_250, updated_at: 7_300 }));
    const row = stores.runs.get('local', 'r4');
    assert.equal(row?.status, 'running');
    assert.equal(row?.started_at, 7_000);
    assert.deepEqual(stores.runs.list({ limit: 10, since: 7_000, until: 7_001 }).map((r) => r.run), ['r4']);
  });

  it('stores the same row and Run JSON whether or not an update changes an indexed column', () => {
    // An update that leaves every indexed column as it is sets only the others (runs-store.ts updateUnindexedStmt).
    const { db, stores } = memoryControlStores();
    const direct = memoryControlStores();
    const last = run(7, { brief: 'b', cost_usd: 0.5, error: 'x', repo_path: '/work/q', updated_at: 30 });
    stores.runs.upsert('local', run(7, { brief: 'a', cost_usd: 0.5, repo_path: '/work/q', updated_at: 10 }));
    assert.equal(stores.runs.upsert('local', run(7, { brief: 'b', cost_usd: 0.5, started_at: 2_000, updated_at: 20 })), true);
    assert.equal(stores.runs.upsert('local', last), true);
    assert.equal(stores.runs.upsert('local', run(7, { brief: 'old', cost_usd: 0.5, updated_at: 25 })), false);
    direct.stores.runs.upsert('local', last);
    const stored = (db: Db) => db.prepare("SELECT * FROM runs WHERE run = 'r7'").get();
    assert.deepEqual(stored(db), stored(direct.db));
    // An indexed column that changes (to null as well) takes the plain upsert.
    stores.runs.upsert('local', run(7, { ...last, verdict: null, cost_usd: null, updated_at: 40 }));
    direct.stores.runs.upsert('local', run(7, { ...last, verdict: null, cost_usd: null, updated_at: 40 }));
    assert.deepEqual(stored(db), stored(direct.db));
    assert.equal(stores.runs.get('local', 'r7')?.verdict, null);
  });

  it('patches only the given columns and reports a missing run', () => {
    assert.equal(stores.runs.setStatus('local', 'r3', 'blocked', 9_000, { question: 'Which DB?' }), true);
    const row = stores.runs.get('local', 'r3');
    assert.equal(row?.status, 'blocked');
    assert.equal(row?.question, 'Which DB?');
    assert.equal(row?.updated_at, 9_000);
    assert.equal(row?.repo_path, '/work/p');
    assert.equal(stores.runs.patch('local', 'nope', { status: 'failed' }), false);
  });

  it('lists newest first and walks a keyset without duplicates or gaps', () => {
    for (let i = 10; i < 40; i++) stores.runs.upsert('other', run(i, { started_at: 2_000 + (i % 3) }));
    const seen: string[] = [];
    let after: RunFilter['after'];
    for (;;) {
      const rows = stores.runs.list({ limit: 7, ...(after ? { after } : {}) });
      if (rows.length === 0) break;
      seen.push(...rows.map((r) => `${r.source}/${r.run}`));
      const last = rows[rows.length - 1]!;
      after = { started_at: last.started_at, source: last.source, run: last.run };
    }
    const all = stores.runs.list({ limit: 1000 });
    assert.equal(seen.length, all.length);
    assert.equal(new Set(seen).size, seen.length);
    for (let i = 1; i < all.length; i++) {
      const a = all[i - 1]!;
      const b = all[i]!;
      const newer = a.started_at !== b.started_at ? a.started_at > b.started_at : a.source !== b.source ? a.source > b.source : a.run > b.run;
      assert.ok(newer, `${a.source}/${a.run} sorts before ${b.source}/${b.run}`);
    }
  });

  it('filters by verdict, null verdict, repo, group and time window', () => {
    stores.runs.upsert('f', run(100, { verdict: null, repo: 'x/y', group_id: 'g1', started_at: 50_000 }));
    stores.runs.upsert('f', run(101, { verdict: 'not_verified', repo: 'x/y', group_id: 'g1', started_at: 50_010 }));
    assert.deepEqual(stores.runs.list({ limit: 10, verdict: null }).map((r) => r.run), ['r100']);
    assert.deepEqual(stores.runs.list({ limit: 10, verdict: 'not_verified' }).map((r) => r.run), ['r101']);
    assert.deepEqual(stores.runs.list({ limit: 10, repo: 'x/y' }).map((r) => r.run), ['r101', 'r100']);
    assert.deepEqual(stores.runs.list({ limit: 10, group_id: 'g1', since: 50_005 }).map((r) => r.run), ['r101']);
    assert.deepEqual(stores.runs.list({ limit: 10, since: 50_000, until: 50_010 }).map((r) => r.run), ['r100']);
  });

  it('refuses to delete an active run and deletes a finished one with its events, artifacts and requests', () => {
    stores.runs.upsert('d', run(1, { status: 'running' }));
    assert.equal(stores.runs.delete('d', 'r1'), 'active');
    stores.runs.upsert('d', run(2));
    stores.events.insert({ source: 'd', run: 'r2', seq: 1, ts: 1, kind: 'log', data: '{}' });
    stores.artifacts.put('d', 'r2', { path: 'a.txt', content_type: 'text/plain', content: Buffer.from('x') });
    stores.controlRequests.add('d', 'r2', 'stop');
    stores.startRequests.add({ request_id: 'req-d', body_sha256: 'h', source: 'd', run: 'r2', created_at: 1 });
    assert.equal(stores.runs.delete('d', 'r2'), 'deleted');
    assert.equal(stores.startRequests.get('req-d'), undefined);
    assert.equal(stores.runs.get('d', 'r2'), undefined);
    assert.equal(stores.events.listAll({ source: 'd', run: 'r2', after: 0, limit: 10 }).length, 0);
    assert.equal(stores.artifacts.list('d', 'r2').length, 0);
    assert.equal(stores.controlRequests.pending('d').length, 0);
    assert.equal(stores.runs.delete('d', 'r2'), 'not_found');
  });
});

describe('runs list query plan', () => {
  let db: Db;
  before(() => {
    db = openDatabase(':memory:', controlMigrations);
    db.exec('ANALYZE');
  });
  after(() => db.close());
  const key = { started_at: 5, source: 's', run: 'r' };

  it('walks runs_by_start for the unfiltered list and its next pages without sorting', () => {
    for (const f of [{ limit: 51 }, { limit: 51, after: key }]) {
      const p = plan(db, f);
      assert.match(p, /runs_by_start/);
      assert.doesNotMatch(p, /TEMP B-TREE/);
    }
  });

  it('ranges the index on the tighter of a cursor and an until, never filtering a walk by the other', () => {
    const below = { ...key, started_at: 3 };
    assert.match(buildListQuery({ limit: 51, after: key, until: 1e15 }).sql, /\(started_at, source, run\) < \(\?, \?, \?\)/);
    assert.doesNotMatch(buildListQuery({ limit: 51, after: key, until: 1e15 }).sql, /started_at < \?/);
    assert.match(buildListQuery({ limit: 51, after: key, until: 4 }).sql, /started_at < \?/);
    assert.doesNotMatch(buildListQuery({ limit: 51, after: key, until: 4 }).sql, /\(started_at, source, run\)/);
    assert.match(buildListQuery({ limit: 51, after: below, until: 5 }).sql, /\(started_at, source, run\) </);
  });

  it('uses the matching index for verdict, repo and group filters without sorting', () => {
    const cases: Array<[RunFilter, RegExp]> = [
      [{ limit: 51, verdict: 'verified', after: key }, /runs_by_verdict/],
      [{ limit: 51, verdict: null }, /runs_by_verdict/],
      [{ limit: 51, repo: 'a/b', after: key }, /runs_by_repo/],
      [{ limit: 51, group_id: 'g', after: key }, /runs_by_group/],
    ];
    for (const [f, index] of cases) {
      const p = plan(db, f);
      assert.match(p, index, p);
      assert.doesNotMatch(p, /TEMP B-TREE/, p);
    }
  });
});
