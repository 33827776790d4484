import { describe, it, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import type { RunInput } from '../../src/db/run-types.ts';

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 1, 12);

function put(control: TestControl, runs: RunInput[]): void {
  for (const r of runs) control.deps.stores.runs.upsert('local', r);
}

describe('GET /v1/stats', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());
  beforeEach(() => control.deps.db.exec('DELETE FROM runs'));

  it('answers zeros and nulls, not errors, on an empty database', async () => {
    const res = await control.request('GET', '/v1/stats');
    assert.equal(res.status, 200);
    assert.equal(res.json.runs, 0);
    assert.equal(res.json.success_rate, null);
    assert.deepEqual(res.json.duration_ms, { ended: 0, p50: null, p95: null });
    assert.deepEqual(res.json.per_day, []);
    assert.equal(res.json.by_status.running, 0);
    assert.equal(res.json.by_verdict.none, 0);
  });

  it('counts runs by status and verdict and computes the success rate over terminal runs', async () => {
    put(control, [
      makeRun(1, { status: 'succeeded', verdict: 'verified', ended_at: T0 }),
      makeRun(2, { status: 'succeeded', verdict: 'verified_with_gaps', ended_at: T0 }),
      makeRun(3, { status: 'failed', verdict: 'not_verified', ended_at: T0 }),
      makeRun(4, { status: 'stopped', verdict: null, ended_at: T0 }),
      makeRun(5, { status: 'running', verdict: null }),
      makeRun(6, { status: 'blocked', verdict: null }),
    ]);
    const { json } = await control.request('GET', '/v1/stats');
    assert.equal(json.runs, 6);
    assert.deepEqual(json.by_status, { queued: 0, running: 1, blocked: 1, stopping: 0, succeeded: 2, failed: 1, stopped: 1 });
    assert.deepEqual(json.by_verdict, { verified: 1, verified_with_gaps: 1, not_verified: 1, none: 3 });
    assert.equal(json.terminal, 4);
    assert.equal(json.success_rate, 0.5);
  });

  it('reports nearest-rank p50 and p95 of the durations of ended runs only', async () => {
    const runs: RunInput[] = [];
    for (let i = 1; i <= 20; i++) runs.push(makeRun(i, { started_at: T0, ended_at: T0 + i * 1000 }));
    runs.push(makeRun(99, { status: 'running', started_at: T0 - 10 * DAY }));
    put(control, runs);
    const { json } = await control.request('GET', '/v1/stats');
    assert.deepEqual(json.duration_ms, { ended: 20, p50: 10_000, p95: 19_000 });
  });

  it('groups runs per UTC day, oldest first, with succeeded and failed counts', async () => {
    put(control, [
      makeRun(1, { started_at: T0, status: 'succeeded' }),
      makeRun(2, { started_at: T0 + 1000, status: 'failed' }),
      makeRun(3, { started_at: T0 + 2 * DAY, status: 'running' }),
    ]);
    const { json } = await control.request('GET', '/v1/stats');
    assert.deepEqual(json.per_day, [
      { date: '2026-01-01', runs: 2, succeeded: 1, failed: 1 },
      { date: '2026-01-03', runs: 1, succeeded: 0, failed: 0 },
    ]);
  });

  it('filters by since (inclusive), until (exclusive) and repo, in ISO or unix ms', async () => {
    put(control, [
      makeRun(1, { started_at: T0, repo: 'acme/api' }),
      makeRun(2, { started_at: T0 + DAY, repo: 'acme/api' }),
      makeRun(3, { started_at: T0 + DAY, repo: 'acme/web' }),
      makeRun(4, { started_at: T0 + 2 * DAY, repo: 'acme/api' }),
    ]);
    const since = new Date(T0 + DAY).toISOString();
    const byIso = await control.request('GET', `/v1/stats?since=${since}&until=${T0 + 2 * DAY}`);
    assert.equal(byIso.json.runs, 2);
    assert.equal(byIso.json.since, since);
    const byRepo = await control.request('GET', `/v1/stats?repo=acme%2Fapi&since=${T0 + DAY}`);
    assert.equal(byRepo.json.runs, 2);
    assert.equal(byRepo.json.repo, 'acme/api');
  });

  it('answers 400 invalid_param to a bad time, an unknown parameter or until before since', async () => {
    for (const q of ['since=yesterday', 'until=2026-13-45', 'since=1e9', 'colour=red', `since=${T0}&until=${T0 - 1}`, 'repo=']) {
      const res = await control.request('GET', `/v1/stats?${q}`);
      assert.equal(res.status, 400, q);
      assert.equal(res.json.error.code, 'invalid_param', q);
    }
  });
});

describe('GET /v1/stats/cost', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());
  beforeEach(() => control.deps.db.exec('DELETE FROM runs'));

  it('reports total cost as null, never 0, when no run has a known cost', async () => {
    put(control, [makeRun(1, { cost_usd: null }), makeRun(2, { cost_usd: null })]);
    const { json } = await control.request('GET', '/v1/stats/cost');
    assert.equal(json.total_usd, null);
    assert.equal(json.runs, 2);
    assert.equal(json.runs_unknown_cost, 2);
    assert.equal(json.runs_with_cost, 0);
    assert.equal(json.tokens_in, null);
  });

  it('sums known costs, counts unknown ones apart and keeps a real 0 as 0', async () => {
    put(control, [
      makeRun(1, { cost_usd: 0.1, tokens_in: 100, tokens_out: 10, provider: 'claude' }),
      makeRun(2, { cost_usd: 0.2, tokens_in: 200, tokens_out: 20, provider: 'claude' }),
      makeRun(3, { cost_usd: null, provider: 'codex' }),
      makeRun(4, { cost_usd: 0, tokens_in: 0, tokens_out: 0, provider: 'gemini' }),
    ]);
    const { json } = await control.request('GET', '/v1/stats/cost');
    assert.equal(json.total_usd, 0.3);
    assert.equal(json.runs_with_cost, 3);
    assert.equal(json.runs_unknown_cost, 1);
    assert.equal(json.tokens_in, 300);
    assert.equal(json.tokens_out, 30);
    const byProvider = Object.fromEntries(json.by_provider.map((g: { provider: string }) => [g.provider, g]));
    assert.equal(byProvider.claude.cost_usd, 0.3);
    assert.equal(byProvider.codex.cost_usd, null, 'a group of only unknown costs is null');
    assert.equal(byProvider.codex.runs_unknown_cost, 1);
    assert.equal(byProvider.gemini.cost_usd, 0, 'a measured zero stays zero');
  });

  it('groups cost by repo and per UTC day', async () => {
    put(control, [
      makeRun(1, { started_at: T0, repo: 'acme/api', cost_usd: 1.25 }),
      makeRun(2, { started_at: T0 + DAY, repo: 'acme/web', cost_usd: 2 }),
      makeRun(3, { started_at: T0 + DAY, repo: 'acme/web', cost_usd: null }),
    ]);
    const { json } = await control.request('GET', '/v1/stats/cost');
    assert.deepEqual(
      json.by_repo.map((g: { repo: string; cost_usd: number; runs: number }) => [g.repo, g.runs, g.cost_usd]),
      [['acme/web', 2, 2], ['acme/api', 1, 1.25]],
    );
    assert.deepEqual(
      json.per_day.map((g: { date: string; cost_usd: number }) => [g.date, g.cost_usd]),
      [['2026-01-01', 1.25], ['2026-01-02', 2]],
    );
  });

  it('applies the same since, until and repo filters as /v1/stats', async () => {
    put(control, [makeRun(1, { started_at: T0, cost_usd: 5 }), makeRun(2, { started_at: T0 + DAY, cost_usd: 7 })]);
    assert.equal((await control.request('GET', `/v1/stats/cost?since=${T0 + 1}`)).json.total_usd, 7);
    assert.equal((await control.request('GET', `/v1/stats/cost?repo=nope`)).json.total_usd, null);
    assert.equal((await control.request('GET', '/v1/stats/cost?until=not-a-time')).json.error.code, 'invalid_param');
  });
});
