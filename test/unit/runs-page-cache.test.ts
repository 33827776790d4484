import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { transaction } from '../../src/db/open.ts';
import { memoryControlStores } from '../helpers/memory-stores.ts';
import { createRunsPageCache, filterKey, MAX_ENTRIES, MAX_BYTES } from '../../src/control/runs-page-cache.ts';
import type { RunFilter } from '../../src/db/runs-store.ts';

describe('runs page cache', () => {
  it('gives every distinct filter its own key, including none versus absent and zero versus absent', () => {
    const filters: RunFilter[] = [
      { limit: 50 }, { limit: 51 }, { limit: 50, verdict: null }, { limit: 50, verdict: 'verified' },
      { limit: 50, repo: 'a' }, { limit: 50, repo: 'false' }, { limit: 50, group_id: 'a' }, { limit: 50, status: 'queued' },
      { limit: 50, since: 0 }, { limit: 50, until: 0 }, { limit: 50, since: 1 }, { limit: 50, until: 1 },
      { limit: 50, after: { started_at: 0, source: 'a', run: 'b' } }, { limit: 50, after: { started_at: 0, source: 'a', run: 'c' } },
      { limit: 50, repo: 'a', group_id: 'b' }, { limit: 50, repo: 'b', group_id: 'a' },
    ];
    const keys = filters.map(filterKey);
    assert.equal(new Set(keys).size, filters.length);
    assert.equal(filterKey({ limit: 50, repo: 'a', verdict: null }), filterKey({ verdict: null, repo: 'a', limit: 50 }));
  });

  it('keeps a page from its second ask while the stamp stays, and rebuilds after it moves', () => {
    let stamp = 's1';
    let builds = 0;
    const cache = createRunsPageCache({ changeStamp: () => stamp });
    const build = (): Buffer => Buffer.from(`page ${++builds}`);
    const once = cache.page({ limit: 5 }, build);
    assert.deepEqual([once.body.toString(), once.owned], ['page 1', true]);
    assert.equal(cache.size(), 0, 'a page asked for once is not kept, so the request owns it');
    const kept = cache.page({ limit: 5 }, build);
    assert.deepEqual([kept.body.toString(), kept.owned], ['page 2', false], 'a kept page is never the request\'s');
    const hit = cache.page({ limit: 5 }, build);
    assert.deepEqual([hit.body.toString(), hit.owned], ['page 2', false]);
    assert.equal(cache.page({ limit: 6 }, build).body.toString(), 'page 3');
    stamp = 's2';
    assert.equal(cache.page({ limit: 5 }, build).body.toString(), 'page 4', 'a change drops the kept page');
    assert.equal(cache.page({ limit: 5 }, build).body.toString(), 'page 4', 'a page polled before the change is kept again at once');
    assert.equal(cache.page({ limit: 6 }, build).body.toString(), 'page 5', 'limit=6, seen once before the change, is built and kept');
    assert.equal(cache.size(), 2);
  });

  it('never lets one-off filters evict a page being polled', () => {
    let builds = 0;
    const cache = createRunsPageCache({ changeStamp: () => 'same' });
    const build = (): Buffer => Buffer.from(`page ${++builds}`);
    cache.page({ limit: 50 }, build);
    cache.page({ limit: 50 }, build);
    for (let i = 0; i < 10 * MAX_ENTRIES; i++) cache.page({ limit: 50, until: i }, build);
    const before = builds;
    cache.page({ limit: 50 }, build);
    assert.equal(builds, before);
    assert.equal(cache.size(), 1);
  });

  it('never keeps a page while the stamp is null (a transaction is open)', () => {
    let builds = 0;
    const cache = createRunsPageCache({ changeStamp: () => null });
    cache.page({ limit: 5 }, () => Buffer.from(`page ${++builds}`));
    assert.equal(cache.page({ limit: 5 }, () => Buffer.from(`page ${++builds}`)).body.toString(), 'page 2');
    assert.equal(cache.size(), 0);
  });

  it('holds at most MAX_ENTRIES pages, evicting the least recently used', () => {
    let builds = 0;
    const cache = createRunsPageCache({ changeStamp: () => 'same' });
    const build = (): Buffer => Buffer.from(`page ${++builds}`);
    const twice = (f: RunFilter): void => {
      cache.page(f, build);
      cache.page(f, build);
    };
    for (let i = 1; i <= MAX_ENTRIES; i++) twice({ limit: i });
    cache.page({ limit: 1 }, build); // touch: limit=1 is now the most recent
    twice({ limit: MAX_ENTRIES + 1 }); // evicts limit=2
    assert.equal(cache.size(), MAX_ENTRIES);
    const before = builds;
    cache.page({ limit: 1 }, build);
    assert.equal(builds, before, 'limit=1 was kept');
    cache.page({ limit: 2 }, build);
    assert.equal(builds, before + 1, 'limit=2 was evicted');
  });

  it('bounds the bytes held and does not keep a page bigger than a quarter of the bound', () => {
    let builds = 0;
    const cache = createRunsPageCache({ changeStamp: () => 'same' });
    const big = (): Buffer => Buffer.from(`${++builds}`.padEnd(MAX_BYTES / 4 + 1, 'x'));
    for (let i = 0; i < 3; i++) cache.page({ limit: 1 }, big);
    assert.equal(builds, 3);
    assert.equal(cache.size(), 0);
    const quarter = (): Buffer => Buffer.from(`${++builds}`.padEnd(MAX_BYTES / 4, 'x'));
    for (let i = 1; i <= 6; i++) {
      cache.page({ limit: i }, quarter);
      cache.page({ limit: i }, quarter);
    }
    assert.equal(cache.size(), 4);
  });
});

describe('runs store change stamp', () => {
  const { db, stores } = memoryControlStores();

  const run = { run: 'r1', status: 'succeeded' as const, started_at: 1000, updated_at: 1000 };

  it('moves on every insert, update, patch, status change and delete', () => {
    const seen = new Set<string | null>([stores.runs.changeStamp()]);
    const step = (what: string, fn: () => unknown): void => {
      fn();
      const stamp = stores.runs.changeStamp();
      assert.ok(!seen.has(stamp), `${what} did not move the stamp`);
      seen.add(stamp);
    };
    step('insert', () => stores.runs.upsert('local', run));
    step('upsert update', () => stores.runs.upsert('local', { ...run, updated_at: 2000, brief: 'b' }));
    step('patch', () => stores.runs.patch('local', 'r1', { brief: 'c' }));
    step('setStatus', () => stores.runs.setStatus('local', 'r1', 'failed', 3000));
    step('delete', () => stores.runs.delete('local', 'r1'));
    step('plain SQL on this connection', () => db.exec("INSERT INTO runs (source, run, group_id, status, started_at, updated_at) VALUES ('x', 'y', 'y', 'queued', 1, 1)"));
    step('DELETE without WHERE', () => db.exec('DELETE FROM runs'));
  });

  it('stays put while nothing is written', () => {
    const a = stores.runs.changeStamp();
    stores.runs.list({ limit: 10 });
    stores.runs.get('local', 'r1');
    assert.equal(stores.runs.changeStamp(), a);
  });

  it('is null inside a transaction, so uncommitted rows are never cached', () => {
    transaction(db, () => {
      assert.equal(stores.runs.changeStamp(), null);
    });
    assert.notEqual(stores.runs.changeStamp(), null);
  });
});
