import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, seedRuns, makeRun, type TestControl } from '../helpers/control-server.ts';

const RUN_KEYS = [
  'source', 'run', 'repo', 'group_id', 'status', 'verdict', 'brief', 'origin', 'provider', 'branch', 'pr_url', 'question',
  'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error', 'failure',
  'reported', 'metered', 'trace_id',
].sort();

describe('GET /v1/runs', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    seedRuns(cp.deps, 120);
  });
  after(() => cp.close());

  it('answers newest first with 50 items by default and an opaque next_cursor', async () => {
    const res = await cp.request('GET', '/v1/runs');
    assert.equal(res.status, 200);
    assert.equal(res.json.items.length, 50);
    assert.equal(res.json.items[0].run, 'r000119');
    assert.equal(typeof res.json.next_cursor, 'string');
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  it('serves the Run JSON fields exactly, with ISO times and no internal fields', async () => {
    cp.deps.stores.runs.upsert('local', makeRun(500, { repo_path: '/secret/path', pid: 4242, extra: '{"x":1}', cost_usd: null }));
    const res = await cp.request('GET', '/v1/runs?limit=1');
    const item = res.json.items[0];
    assert.deepEqual(Object.keys(item).sort(), RUN_KEYS);
    assert.match(item.started_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(item.cost_usd, null);
    assert.doesNotMatch(res.text, /secret|4242/);
    cp.deps.stores.runs.delete('local', 'r000500');
  });

  it('pages through every run once with the cursor', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await cp.request('GET', `/v1/runs?limit=35${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      seen.push(...res.json.items.map((r: { run: string }) => r.run));
      cursor = res.json.next_cursor;
    } while (cursor);
    assert.equal(seen.length, 120);
    assert.equal(new Set(seen).size, 120);
  });

  it('stays stable while newer runs arrive between pages: no duplicates, no gaps', async () => {
    const first = await cp.request('GET', '/v1/runs?limit=40');
    for (let i = 0; i < 10; i++) cp.deps.stores.runs.upsert('local', makeRun(1000 + i));
    const rest: string[] = [];
    let cursor: string | null = first.json.next_cursor;
    while (cursor) {
      const res = await cp.request('GET', `/v1/runs?limit=40&cursor=${cursor}`);
      rest.push(...res.json.items.map((r: { run: string }) => r.run));
      cursor = res.json.next_cursor;
    }
    const all = [...first.json.items.map((r: { run: string }) => r.run), ...rest];
    assert.equal(all.length, 120);
    assert.equal(new Set(all).size, 120);
    for (let i = 0; i < 10; i++) cp.deps.stores.runs.delete('local', `r00${1000 + i}`);
  });

  it('clamps limit above 500 to 500', async () => {
    seedRuns(cp.deps, 600, { repo: 'big/repo' }, 'bulk');
    const res = await cp.request('GET', '/v1/runs?limit=100000&repo=big/repo');
    assert.equal(res.json.items.length, 500);
  });

  it('filters by verdict, none, repo, group_id, since and until', async () => {
    cp.deps.stores.runs.upsert('flt', makeRun(2000, { verdict: null, repo: 'f/one', group_id: 'g1' }));
    cp.deps.stores.runs.upsert('flt', makeRun(2001, { verdict: 'not_verified', repo: 'f/one', group_id: 'g1' }));
    const runsOf = async (q: string): Promise<string[]> => (await cp.request('GET', `/v1/runs?${q}`)).json.items.map((r: { run: string }) => r.run);
    assert.deepEqual(await runsOf('verdict=none'), ['r002000']);
    assert.deepEqual(await runsOf('verdict=not_verified'), ['r002001']);
    assert.deepEqual(await runsOf('repo=f%2Fone'), ['r002001', 'r002000']);
    assert.deepEqual(await runsOf('group_id=g1&verdict=not_verified'), ['r002001']);
    const t = Date.UTC(2026, 0, 1) + 2001 * 1000;
    assert.deepEqual(await runsOf(`repo=f/one&since=${new Date(t).toISOString()}`), ['r002001']);
    assert.deepEqual(await runsOf(`repo=f/one&until=${t}`), ['r002000']);
  });

  for (const [query, name] of [
    ['limit=0', 'limit'],
    ['limit=-3', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['verdict=great', 'verdict'],
    ['failure=flaky', 'failure'],
    ['failure=INFRA', 'failure'],
    ['since=yesterday', 'since'],
    ['until=2026-13-45T99:00:00Z', 'until'],
    ['group_id=..%2Fx', 'group_id'],
    ['color=red', 'color'],
    ['limit=5&limit=6', 'limit'],
  ] as const) {
    it(`rejects ${query} with 400 invalid_param naming ${name}`, async () => {
      const res = await cp.request('GET', `/v1/runs?${query}`);
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.match(res.json.error.message, new RegExp(name));
    });
  }
});

describe('GET and DELETE /v1/runs/:source/:run', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    cp.deps.stores.runs.upsert('local', makeRun(1, { status: 'running' }));
    cp.deps.stores.runs.upsert('local', makeRun(2, { status: 'failed', verdict: 'not_verified' }));
    cp.deps.stores.events.insert({ source: 'local', run: 'r000002', seq: 1, ts: 1, kind: 'log', data: '{}' });
    cp.deps.stores.artifacts.put('local', 'r000002', { path: 'receipt.json', content_type: 'application/json', content: Buffer.from('{}') });
  });
  after(() => cp.close());

  it('returns the run detail with its artifact index', async () => {
    const res = await cp.request('GET', '/v1/runs/local/r000002');
    assert.equal(res.status, 200);
    assert.equal(res.json.status, 'failed');
    assert.deepEqual(res.json.artifacts.map((a: { path: string }) => a.path), ['receipt.json']);
  });

  it('answers 404 not_found for an unknown run', async () => {
    const res = await cp.request('GET', '/v1/runs/local/nope');
    assert.equal(res.status, 404);
    assert.equal(res.json.error.code, 'not_found');
  });

  it('answers 400 invalid_param for a malformed run segment', async () => {
    const res = await cp.request('GET', '/v1/runs/local/-bad');
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
  });

  it('refuses to delete an active run with 409 invalid_transition', async () => {
    const res = await cp.request('DELETE', '/v1/runs/local/r000001');
    assert.equal(res.status, 409);
    assert.equal(res.json.error.code, 'invalid_transition');
    assert.ok(cp.deps.stores.runs.get('local', 'r000001'));
  });

  it('deletes a finished run with its events and artifacts', async () => {
    const res = await cp.request('DELETE', '/v1/runs/local/r000002');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { deleted: true });
    assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'r000002', after: 0, limit: 5 }).length, 0);
    assert.equal(cp.deps.stores.artifacts.list('local', 'r000002').length, 0);
    assert.equal((await cp.request('DELETE', '/v1/runs/local/r000002')).status, 404);
  });
});

describe('security', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'tok-123' });
    seedRuns(cp.deps, 3);
  });
  after(() => cp.close());

  it('needs the bearer token for the run list', async () => {
    assert.equal((await cp.request('GET', '/v1/runs', { token: null })).status, 401);
    assert.equal((await cp.request('GET', '/v1/runs', { token: 'wrong' })).status, 401);
    assert.equal((await cp.request('GET', '/v1/runs')).status, 200);
  });

  for (const cursor of ['not-a-cursor!', 'eyJ4IjoxfQ', Buffer.from('[1,"../x","r"]').toString('base64url'), 'A'.repeat(500)]) {
    it(`rejects the forged cursor ${cursor.slice(0, 16)} with 400 invalid_param`, async () => {
      const res = await cp.request('GET', `/v1/runs?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, 'invalid_param');
    });
  }

  it('refuses a cross-origin DELETE', async () => {
    const res = await cp.request('DELETE', '/v1/runs/local/r000000', { headers: { origin: 'https://evil.example' } });
    assert.equal(res.status, 403);
    assert.ok(cp.deps.stores.runs.get('local', 'r000000'));
  });
});

describe('a run\'s failure: ingest, the Run JSON and GET /v1/runs?failure=', () => {
  let cp: TestControl;
  const T0 = '2026-03-01T10:00:00.000Z';
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  const ended = (run: string, status: string, failure: unknown) =>
    ({ run, status, started_at: T0, updated_at: T0, ended_at: T0, repo: 'acme/api', failure });
  const ingest = (runs: unknown[]) => cp.request('POST', '/v1/ingest', { body: { source: 'box', runs } });

  it('stores the failure a runner ships and serves it in the list, the detail and the filter', async () => {
    const res = await ingest([
      ended('rinfra', 'failed', { class: 'infra', reason: 'the agent sandbox did not start', retryable: true }),
      ended('ragent', 'failed', { class: 'agent', reason: 'Provider fake exited with code 3', retryable: false }),
      ended('rstop', 'stopped', { class: 'stopped', reason: 'stopped by svc runs stop', retryable: false }),
      ended('rok', 'succeeded', null),
      // A runner from before failure classes sends none: the run has none.
      { run: 'rold', status: 'failed', started_at: T0, updated_at: T0, error: 'boom' },
    ]);
    assert.equal(res.status, 200, res.text);
    const detail = await cp.request('GET', '/v1/runs/box/rinfra');
    assert.deepEqual(detail.json.failure, { class: 'infra', reason: 'the agent sandbox did not start', retryable: true });
    assert.equal((await cp.request('GET', '/v1/runs/box/rok')).json.failure, null);
    assert.equal((await cp.request('GET', '/v1/runs/box/rold')).json.failure, null);
    const runsOf = async (q: string): Promise<string[]> =>
      (await cp.request('GET', `/v1/runs?source=box&${q}`)).json.items.map((r: { run: string }) => r.run);
    assert.deepEqual(await runsOf('failure=infra'), ['rinfra']);
    assert.deepEqual(await runsOf('failure=stopped&status=stopped'), ['rstop']);
    assert.deepEqual(await runsOf('failure=checks'), []);
    const listed = (await cp.request('GET', '/v1/runs?source=box&failure=agent')).json.items[0];
    assert.deepEqual(listed.failure, { class: 'agent', reason: 'Provider fake exited with code 3', retryable: false });
  });

  it('answers an unknown class with 400 invalid_param in the house error shape', async () => {
    const res = await cp.request('GET', '/v1/runs?failure=cosmic_rays');
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.json), ['error']);
    assert.equal(res.json.error.code, 'invalid_param');
    assert.match(res.json.error.message, /"failure" must be one of infra, config, agent, checks, policy, budget, limit, stopped/);
  });

  const toStringer = { class: 'infra', reason: 'x', retryable: true, toString: () => 'infra' };
  for (const [what, failure, field] of [
    ['a class svc does not know', { class: 'gremlins', reason: 'x', retryable: false }, 'failure.class'],
    ['a class that is not a string', { class: ['infra'], reason: 'x', retryable: true }, 'failure.class'],
    ['an object with its own toString as the class', { class: { toString: 'infra' }, reason: 'x', retryable: true }, 'failure.class'],
    ['a reason that is not a string', { class: 'agent', reason: { toString: null }, retryable: false }, 'failure.reason'],
    ['a 100 kB reason', { class: 'agent', reason: 'x'.repeat(100_000), retryable: false }, 'failure.reason'],
    ['retryable as a string', { class: 'infra', reason: 'x', retryable: 'true' }, 'failure.retryable'],
    ['a field of its own', { ...toStringer, toString: 'infra' }, 'unknown field "toString"'],
    ['a string instead of an object', 'infra', 'failure'],
    ['an array', [{ class: 'infra', reason: 'x', retryable: true }], 'failure'],
  ] as const) {
    it(`refuses ${what} with 400 and writes nothing`, async () => {
      const res = await ingest([ended('rhostile', 'failed', failure)]);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.ok(res.json.error.message.includes(field), res.json.error.message);
      assert.equal(cp.deps.stores.runs.get('box', 'rhostile'), undefined);
    });
  }

  it('stores a shipped trace_id of 32 hex digits and refuses anything else with 400, writing nothing', async () => {
    const traced = { ...ended('rtraced', 'succeeded', null), trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' };
    assert.equal((await ingest([traced])).status, 200);
    assert.equal((await cp.request('GET', '/v1/runs/box/rtraced')).json.trace_id, traced.trace_id);
    for (const bad of ['4BF92F3577B34DA6A3CE929D0E0E4736', 'x'.repeat(32), '4bf92f35', 7, { toString: null }]) {
      const res = await ingest([{ ...ended('rbadtrace', 'succeeded', null), trace_id: bad }]);
      assert.equal(res.status, 400, res.text);
      assert.ok(res.json.error.message.includes('trace_id'), res.json.error.message);
      assert.equal(cp.deps.stores.runs.get('box', 'rbadtrace'), undefined);
    }
  });

  it('keeps no failure on a run that is running or succeeded, and does not refuse its batch for one left over', async () => {
    for (const status of ['running', 'succeeded']) {
      const res = await ingest([ended(`rnot${status}`, status, { class: 'agent', reason: 'x', retryable: false })]);
      assert.equal(res.status, 200, res.text);
      assert.equal((await cp.request('GET', `/v1/runs/box/rnot${status}`)).json.failure, null);
    }
  });
});
