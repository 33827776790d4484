// Ingest cannot rewrite a run's history: no time more than 5 minutes ahead of the Control Plane's clock is taken, and
// a batch claiming to be newer than it is cannot keep the runner's own later update out.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { MAX_FUTURE_MS } from '../../src/engine/run-event.ts';

const MINUTE = 60_000;

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

describe('ingest times ahead of the Control Plane clock', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  it('documents a five-minute bound', () => {
    assert.equal(MAX_FUTURE_MS, 5 * MINUTE);
  });

  const far = (): number => Date.now() + 6 * MINUTE;
  const cases: Array<[string, () => Record<string, unknown>]> = [
    ['a run updated_at', () => ({
      runs: [{ run: 'f1', status: 'running', started_at: iso(Date.now()), updated_at: iso(far()) }],
    })],
    ['a run started_at', () => ({ runs: [{ run: 'f2', status: 'running', started_at: far() }] })],
    ['a run ended_at', () => ({ runs: [{ run: 'f3', status: 'failed', started_at: Date.now(), ended_at: far() }] })],
    ['an event ts', () => ({
      runs: [{ run: 'f4', status: 'running', started_at: Date.now() }],
      events: [{ run: 'f4', seq: 1, ts: iso(far()), kind: 'log' }],
    })],
    ['a notification created_at', () => ({
      notifications: [{ origin: 'chata', channel: 'chata', status: 'sent', created_at: far() }],
    })],
  ];
  for (const [what, body] of cases) {
    it(`refuses ${what} more than 5 minutes ahead with 400 invalid_param and writes nothing`, async () => {
      const before = cp.deps.stores.events.maxId();
      const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', ...body() } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.match(res.json.error.message, /ahead of the Control Plane's clock/);
      assert.equal(cp.deps.stores.events.maxId(), before);
      for (const run of ['f1', 'f2', 'f3', 'f4']) assert.equal(cp.deps.stores.runs.get('laptop', run), undefined);
    });
  }

  it('accepts a runner clock a few minutes ahead, but stores no time later than the batch arrived', async () => {
    const ahead = Date.now() + 4 * MINUTE;
    const res = await cp.request('POST', '/v1/ingest', {
      body: { source: 'laptop', runs: [{ run: 'drift', status: 'running', started_at: ahead, updated_at: ahead }] },
    });
    assert.equal(res.status, 200, res.text);
    const row = cp.deps.stores.runs.get('laptop', 'drift')!;
    assert.equal(row.started_at, ahead);
    assert.ok(row.updated_at <= Date.now(), `${row.updated_at} is in the future`);
  });
});

describe("the runner's own later update", () => {
  let cp: TestControl;
  let root: string;
  before(async () => {
    cp = await startTestControl();
    root = mkdtempSync(join(tmpdir(), 'svc-history-'));
  });
  after(async () => {
    await cp.close();
    rmSync(root, { recursive: true, force: true });
  });

  async function ingest(run: Record<string, unknown>): Promise<void> {
    const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', runs: [run] } });
    assert.equal(res.status, 200, res.text);
  }

  async function shown(run: string): Promise<{ status: string; verdict: string | null }> {
    const res = await cp.request('GET', `/v1/runs/laptop/${run}`);
    return { status: res.json.status, verdict: res.json.verdict };
  }

  it('wins over a forged batch that claims a later time', async () => {
    const started = Date.now() - 10 * MINUTE;
    await ingest({ run: 'rw', status: 'running', started_at: started, updated_at: started });
    // The forger claims the furthest future it is allowed, and a verified success.
    const forged = Date.now() + 4 * MINUTE;
    await ingest({ run: 'rw', status: 'succeeded', verdict: 'verified', started_at: started, updated_at: forged });
    assert.deepEqual(await shown('rw'), { status: 'succeeded', verdict: 'verified' });
    // The real runner finishes afterwards, stamping its own (real) time.
    await ingest({
      run: 'rw', status: 'failed', verdict: 'not_verified', started_at: started, updated_at: Date.now(),
      error: 'checks failed',
    });
    assert.deepEqual(await shown('rw'), { status: 'failed', verdict: 'not_verified' });
  });

  it('still ignores a re-sent older update', async () => {
    const started = Date.now() - 10 * MINUTE;
    await ingest({ run: 'rold', status: 'failed', started_at: started, updated_at: Date.now() - MINUTE });
    await ingest({ run: 'rold', status: 'running', started_at: started, updated_at: Date.now() - 2 * MINUTE });
    assert.equal((await shown('rold')).status, 'failed');
  });

  it('wins over a row stamped in the future before times were bounded', async () => {
    const started = Date.now() - 10 * MINUTE;
    const nextYear = Date.now() + 365 * 24 * 60 * MINUTE;
    const legacy = {
      run: 'rlegacy', status: 'succeeded', verdict: 'verified', started_at: started, updated_at: nextYear,
    } as const;
    cp.deps.stores.runs.upsert('laptop', legacy);
    await ingest({ ...legacy, status: 'failed', verdict: 'not_verified', updated_at: Date.now() });
    assert.deepEqual(await shown('rlegacy'), { status: 'failed', verdict: 'not_verified' });
  });

  it('import skips a state.json dated far in the future and reports why', async () => {
    const project = join(root, 'project');
    mkdirSync(join(project, '.svc', 'runs', 'rfuture'), { recursive: true });
    const future = iso(Date.now() + 60 * MINUTE);
    writeFileSync(
      join(project, '.svc', 'runs', 'rfuture', 'state.json'),
      JSON.stringify({
        run: 'rfuture', status: 'succeeded', verdict: 'verified', started_at: future, updated_at: future,
      }),
    );
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 0);
    assert.match(res.json.skipped[0]?.reason ?? '', /ahead of the Control Plane's clock/);
    assert.equal(cp.deps.stores.runs.get('local', 'rfuture'), undefined);
  });
});
