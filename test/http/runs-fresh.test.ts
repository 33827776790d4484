import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { startTestControl, seedRuns, makeRun, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, SLEEP_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { runToJson } from '../../src/db/runs-store.ts';
import { encodeCursor } from '../../src/control/params.ts';

type Item = { source: string; run: string; status: string; brief: string | null; verdict: string | null };

describe('GET /v1/runs answers what the runs table holds now', () => {
  let cp: TestControl;
  let repo: TestRepo;

  before(async () => {
    repo = makeRepo({ providers: { sleepy: SLEEP_SCRIPT } });
    cp = await startTestControl({ env: { ...GIT_ENV }, projects: [repo.repo] });
    seedRuns(cp.deps, 30);
  });
  after(async () => {
    await cp.close();
    repo.cleanup();
  });

  async function items(query = ''): Promise<Item[]> {
    const res = await cp.request('GET', `/v1/runs${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json.items;
  }

  /** Asks three times (a page is kept from its second ask), so the third answer is a cache hit; returns it. */
  async function cachedItems(query = ''): Promise<Item[]> {
    await items(query);
    await items(query);
    return items(query);
  }

  it('serves the same bytes as JSON.stringify of runToJson, cached or not', async () => {
    cp.deps.stores.runs.upsert('local', makeRun(40, { brief: 'ünïcode "quoted" \u2028 line', cost_usd: 0.1 + 0.2, ended_at: -1, error: 'x\ny' }));
    const expected = (limit: number): string => {
      const rows = cp.deps.stores.runs.list({ limit: limit + 1 });
      const page = rows.slice(0, limit);
      const last = page[page.length - 1]!;
      const next = rows.length > limit ? encodeCursor([last.started_at, last.source, last.run]) : null;
      return JSON.stringify({ items: page.map(runToJson), next_cursor: next });
    };
    for (const limit of [100, 7]) {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await cp.request('GET', `/v1/runs?limit=${limit}`)).text);
      assert.deepEqual(answers, [expected(limit), expected(limit), expected(limit)]);
    }
    const second = await cp.request('GET', '/v1/runs?limit=7');
    assert.equal(second.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(second.headers.get('cache-control'), 'no-store');
    cp.deps.stores.runs.delete('local', 'r000040');
  });

  it('shows a run ingested over HTTP on the very next list call, and its later status', async () => {
    assert.ok(!(await cachedItems()).some((r) => r.run === 'fresh1'));
    // Newer than every seeded run, and not in the future: ingest refuses times more than 5 minutes ahead.
    const t = new Date(Date.now() - 60_000).toISOString();
    const run = { run: 'fresh1', status: 'running', started_at: t, updated_at: t, repo: 'acme/api' };
    const ingest = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', runs: [run], events: [], artifacts: [] } });
    assert.equal(ingest.status, 200, ingest.text);
    assert.equal((await items())[0]?.run, 'fresh1');
    const later = { ...run, status: 'succeeded', updated_at: new Date(Date.parse(t) + 1000).toISOString() };
    await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', runs: [later], events: [], artifacts: [] } });
    assert.equal((await items())[0]?.status, 'succeeded');
  });

  it('drops a deleted run from the very next list call', async () => {
    assert.equal((await cachedItems())[0]?.run, 'fresh1');
    const del = await cp.request('DELETE', '/v1/runs/laptop/fresh1');
    assert.equal(del.status, 200, del.text);
    assert.ok(!(await items()).some((r) => r.run === 'fresh1'));
  });

  it('shows a status change made through the store, as the engine makes it, on the next call', async () => {
    assert.equal((await cachedItems())[0]?.status, 'succeeded');
    cp.deps.stores.runs.setStatus('local', 'r000029', 'failed', Date.now());
    assert.equal((await items())[0]?.status, 'failed');
  });

  it('shows a write made with plain SQL on the server connection on the next call', async () => {
    await cachedItems();
    cp.deps.db.exec("UPDATE runs SET brief = 'edited in place' WHERE run = 'r000029'");
    assert.equal((await items())[0]?.brief, 'edited in place');
  });

  it('shows a write committed by another connection (another process) on the next call', async () => {
    await cachedItems();
    const other = new DatabaseSync(join(cp.dir, 'control.db'));
    try {
      other.exec('PRAGMA busy_timeout = 5000');
      other.exec("UPDATE runs SET brief = 'from elsewhere' WHERE run = 'r000029'");
    } finally {
      other.close();
    }
    assert.equal((await items())[0]?.brief, 'from elsewhere');
  });

  it('shows a run started over HTTP at once, and its stop', async () => {
    await cachedItems();
    const start = await cp.request('POST', '/v1/start', { body: { brief: 'sleep a while', repo: repo.repo, provider: 'sleepy' } });
    assert.equal(start.status, 202, start.text);
    const { source, run } = start.json;
    const listed = (await items('?limit=500')).find((r) => r.run === run);
    assert.ok(listed, 'the started run is listed on the next call');
    await waitFor(async () => (await items('?limit=500')).find((r) => r.run === run && r.status === 'running'), 'run to be running');
    await cachedItems('?limit=500');
    const stop = await cp.request('POST', `/v1/runs/${source}/${run}/stop`, { body: {} });
    assert.equal(stop.status, 202, stop.text);
    const now = (await items('?limit=500')).find((r) => r.run === run);
    assert.ok(now && now.status !== 'running', `status after stop is ${now?.status}`);
    await waitFor(async () => (await items('?limit=500')).find((r) => r.run === run && r.status === 'stopped'), 'run to be stopped');
  });

  it('never answers one filter with the page of another', async () => {
    cp.deps.stores.runs.upsert('flt', makeRun(3000, { verdict: null, repo: 'f/one' }));
    cp.deps.stores.runs.upsert('flt', makeRun(3001, { verdict: 'not_verified', repo: 'f/one' }));
    cp.deps.stores.runs.upsert('flt', makeRun(3002, { verdict: 'verified', repo: 'f/two' }));
    const ask = async (q: string): Promise<string[]> => (await cachedItems(q)).map((r) => r.run);
    const since3001 = Date.UTC(2026, 0, 1) + 3001 * 1000;
    // Every pair below differs in one parameter only; each is asked three times, so the last answer comes from the cache.
    for (let round = 0; round < 2; round++) {
      assert.deepEqual(await ask('?repo=f%2Fone'), ['r003001', 'r003000']);
      assert.deepEqual(await ask('?repo=f%2Fone&verdict=none'), ['r003000']);
      assert.deepEqual(await ask('?repo=f%2Fone&verdict=not_verified'), ['r003001']);
      assert.deepEqual(await ask('?repo=f%2Ftwo'), ['r003002']);
      assert.deepEqual(await ask('?repo=f%2Fone&limit=1'), ['r003001']);
      assert.deepEqual(await ask(`?repo=f%2Fone&since=${since3001}`), ['r003001']);
      assert.deepEqual(await ask('?repo=f%2Fone&since=0'), ['r003001', 'r003000']);
      assert.deepEqual(await ask(`?repo=f%2Fone&until=${since3001}`), ['r003000']);
      assert.deepEqual(await ask('?repo=f%2Fone&status=succeeded&limit=50'), ['r003001', 'r003000']);
      assert.deepEqual(await ask('?repo=f%2Fone&status=failed'), []);
    }
    const page1 = await cp.request('GET', '/v1/runs?limit=5');
    const page2 = await cachedItems(`?limit=5&cursor=${page1.json.next_cursor}`);
    assert.equal(page2.length, 5);
    assert.ok(!page2.some((r) => page1.json.items.some((p: Item) => p.run === r.run)));
  });
});
