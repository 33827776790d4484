// Expensive reads (stats and cost stats) run on their own thread with a bounded queue
// (src/control/expensive-reads.ts): the same answers as the main thread gives, 503 with Retry-After past the queue.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import {
  createExpensiveReads, IDLE_MS, statsBody, costBody,
} from '../../src/control/expensive-reads.ts';
import { createLogger, silentLogger } from '../../src/log.ts';
import { HttpError } from '../../src/http/http-error.ts';

const DAY = 86_400_000;

describe('expensive reads', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    seedRuns(cp.deps, 300, { ended_at: Date.UTC(2026, 0, 2), cost_usd: 0.25, provider: 'claude' });
    seedRuns(cp.deps, 40, { status: 'failed', verdict: 'not_verified', repo: 'acme/web' }, 'laptop');
  });
  after(() => cp.close());

  it('answers stats and cost stats from the thread exactly as the main thread computes them', async () => {
    for (const q of ['', `?since=${Date.UTC(2026, 0, 1) + 100_000}`, '?repo=acme%2Fweb', `?until=${Date.UTC(2026, 0, 1) + DAY}`]) {
      const filter = Object.fromEntries(new URLSearchParams(q).entries()) as Record<string, string>;
      const f = { ...(filter.since ? { since: Number(filter.since) } : {}), ...(filter.until ? { until: Number(filter.until) } : {}), ...(filter.repo ? { repo: filter.repo } : {}) };
      const stats = await cp.request('GET', `/v1/stats${q}`);
      assert.equal(stats.status, 200, stats.text);
      assert.deepEqual(stats.json, JSON.parse(JSON.stringify(statsBody(cp.deps.stores.stats, f))));
      const cost = await cp.request('GET', `/v1/stats/cost${q}`);
      assert.deepEqual(cost.json, JSON.parse(JSON.stringify(costBody(cp.deps.stores.stats, f))));
    }
    assert.equal((await cp.request('GET', '/v1/stats')).json.runs, 340);
  });

  it('refuses a read past the queue at once with 503 unavailable and Retry-After, and serves the ones queued', async () => {
    const reads = createExpensiveReads({ stats: cp.deps.stores.stats, path: cp.deps.settings.dbPath, log: silentLogger, maxQueued: 2 });
    try {
      const first = reads.stats({});
      const second = reads.cost({});
      await assert.rejects(reads.stats({ repo: 'acme/api' }), (err: unknown) => {
        assert.ok(err instanceof HttpError);
        assert.equal(err.code, 'unavailable');
        assert.equal(err.status, 503);
        assert.equal(err.headers?.['retry-after'], '1');
        return true;
      });
      assert.equal((await first).runs, 340);
      assert.equal((await second).runs, 340);
      assert.equal((await reads.stats({ repo: 'acme/api' })).runs, 300);
    } finally {
      await reads.close();
    }
  });

  it('answers on the main thread, and says so once, when the thread cannot run (its DB cannot be opened there)', async () => {
    const lines: string[] = [];
    const log = createLogger('test', (line) => lines.push(line));
    const reads = createExpensiveReads({ stats: cp.deps.stores.stats, path: '/nonexistent-svc-dir/control.db', log });
    try {
      const [stats, cost] = await Promise.all([reads.stats({}), reads.cost({ repo: 'acme/web' })]);
      assert.equal(stats.runs, 340);
      assert.equal(cost.runs, 40);
      assert.equal((await reads.stats({ repo: 'acme/api' })).runs, 300);
      assert.equal(lines.filter((l) => l.includes('expensive reads back on the main thread')).length, 1);
    } finally {
      await reads.close();
    }
  });

  it('ends an idle thread without calling it a failure, and starts a new one for the next read', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const lines: string[] = [];
    const log = createLogger('test', (line) => lines.push(line));
    const reads = createExpensiveReads({ stats: cp.deps.stores.stats, path: cp.deps.settings.dbPath, log });
    try {
      assert.equal((await reads.stats({})).runs, 340);
      // Past the idle time the first thread is ended (an ended thread's exit is not a fall-back).
      t.mock.timers.tick(IDLE_MS);
      assert.equal((await reads.cost({ repo: 'acme/web' })).runs, 40);
      assert.deepEqual(lines.filter((l) => l.includes('back on the main thread')), []);
    } finally {
      await reads.close();
    }
  });

  it('answers 503 unavailable with Retry-After over HTTP when the queue is full', async () => {
    const own = cp.deps.reads;
    cp.deps.reads = createExpensiveReads({ stats: cp.deps.stores.stats, path: cp.deps.settings.dbPath, log: silentLogger, maxQueued: 0 });
    try {
      for (const path of ['/v1/stats', '/v1/stats/cost?repo=acme%2Fapi']) {
        const res = await cp.request('GET', path);
        assert.equal(res.status, 503, path);
        assert.equal(res.json.error.code, 'unavailable');
        assert.equal(res.headers.get('retry-after'), '1');
      }
      // Runs pages never queue, filtered ones included: each walks an index and stops after its page.
      for (const path of ['/v1/runs?limit=5', `/v1/runs?until=${Date.UTC(2026, 0, 1) + DAY}`, '/v1/runs?status=failed',
        '/v1/runs?group_id=r000001&source=local', '/v1/runs?source=laptop', '/v1/runs?status=failed&repo=acme%2Fweb']) {
        assert.equal((await cp.request('GET', path)).status, 200, path);
      }
    } finally {
      await cp.deps.reads.close();
      cp.deps.reads = own;
    }
  });
});
