import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, EDIT_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { pruneExpiredRuns } from '../../src/control/main.ts';
import { runKeyDigest } from '../../src/control/ingest-apply.ts';
import { identityOf } from '../../src/proc-stat.ts';

const DAY = 24 * 60 * 60 * 1000;
/** Longer than 32 characters: the longest a provider name once was at some of the places that read one. */
const LONG_NAME = 'a-provider-name-of-forty-characters-long';

describe('settings that steer runs: max_concurrent_runs and default_provider', () => {
  let control: TestControl;
  let repo: TestRepo;
  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, [LONG_NAME]: EDIT_SCRIPT } });
    control = await startTestControl({ env: GIT_ENV, projects: [repo.repo] });
  });
  after(async () => {
    await control.close();
    repo.cleanup();
  });

  function settled(run: string, status: string) {
    return waitFor(async () => ((await control.request('GET', `/v1/runs/local/${run}`)).json?.status === status ? true : null), `run ${run} to be ${status}`);
  }

  /** The run once it has ended, whatever its end: a failure then shows its reason, not a timeout. */
  async function ended(run: string) {
    return waitFor(async () => {
      const json = (await control.request('GET', `/v1/runs/local/${run}`)).json;
      return ['succeeded', 'failed', 'stopped'].includes(json?.status) ? json : null;
    }, `run ${run} to end`);
  }

  it('answers 429 too_many_requests with Retry-After to start, retry and resume at the limit', async () => {
    const { runs } = control.deps.stores;
    const now = Date.now();
    runs.upsert('local', makeRun(1, { run: 'rbusy1', status: 'running', started_at: now }));
    runs.upsert('local', makeRun(2, { run: 'rbusy2', status: 'blocked', started_at: now }));
    runs.upsert('elsewhere', makeRun(3, { run: 'rfar', status: 'running', started_at: now }));
    runs.upsert('local', makeRun(4, { run: 'rdone', status: 'succeeded', repo_path: repo.repo }));
    runs.upsert('local', makeRun(5, { run: 'rfailed', status: 'failed', repo_path: repo.repo }));
    assert.equal((await control.request('PUT', '/v1/config', { body: { max_concurrent_runs: 2 } })).status, 200);

    const start = await control.request('POST', '/v1/start', { body: { brief: 'over the limit', repo: repo.repo, provider: 'fake' } });
    assert.equal(start.status, 429, start.text);
    assert.equal(start.json.error.code, 'too_many_requests');
    assert.match(start.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(runs.list({ limit: 50 }).some((r) => r.brief === 'over the limit'), false, 'nothing was queued');
    for (const action of ['retry', 'resume']) {
      const target = action === 'retry' ? 'rdone' : 'rfailed';
      const res = await control.request('POST', `/v1/runs/local/${target}/${action}`, { body: {} });
      assert.equal(res.status, 429, `${action}: ${res.text}`);
    }
    assert.equal(runs.get('local', 'rfailed')?.status, 'failed', 'a refused resume leaves the run alone');

    // Runs of another source are not this machine's: only local ones count.
    runs.setStatus('local', 'rbusy2', 'stopped', Date.now());
    const ok = await control.request('POST', '/v1/start', { body: { brief: 'under the limit', repo: repo.repo, provider: 'fake', request_id: 'lim-1' } });
    assert.equal(ok.status, 202, ok.text);
    // A replayed request_id gets its run back even at the limit.
    const replay = await control.request('POST', '/v1/start', { body: { brief: 'under the limit', repo: repo.repo, provider: 'fake', request_id: 'lim-1' } });
    assert.equal(replay.status, 200, replay.text);
    assert.equal(replay.json.run, ok.json.run);
    await settled(ok.json.run, 'succeeded');
    runs.setStatus('local', 'rbusy1', 'stopped', Date.now());
    await control.request('PUT', '/v1/config', { body: { max_concurrent_runs: null } });
  });

  it('starts a request that names no provider with default_provider', async () => {
    const put = await control.request('PUT', '/v1/config', { body: { providers: { fake: { command: [join(repo.bin, 'fake.sh')] } }, default_provider: 'fake' } });
    assert.equal(put.status, 200, put.text);
    const res = await control.request('POST', '/v1/start', { body: { brief: 'no provider named', repo: repo.repo } });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.provider, 'fake');
    await settled(res.json.run, 'succeeded');
    assert.equal((await control.request('GET', `/v1/runs/local/${res.json.run}`)).json.provider, 'fake');
  });

  // DESIGN §7a: the Control Plane's settings are the operator's, so the providers defined there reach its runs.
  it('starts a run with a default_provider that only the Control Plane\'s providers define', async () => {
    const ghost = join(repo.bin, 'ghost.sh');
    writeFileSync(ghost, '#!/bin/sh\ncat > /dev/null\necho ghost >> a.txt\n', { mode: 0o755 });
    const body = { providers: { ghost: { command: [ghost] } }, default_provider: 'ghost' };
    assert.equal((await control.request('PUT', '/v1/config', { body })).status, 200);
    const res = await control.request('POST', '/v1/start', { body: { brief: 'ghost provider', repo: repo.repo } });
    assert.equal(res.status, 202, res.text);
    const run = await ended(res.json.run);
    assert.equal(run.status, 'succeeded', JSON.stringify(run.failure));
    assert.equal(run.provider, 'ghost');
    assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8').trim().split('\n').pop(), 'ghost');

    const named = await control.request('POST', '/v1/start', {
      body: { brief: 'ghost by name', repo: repo.repo, provider: 'ghost' },
    });
    assert.equal(named.status, 202, named.text);
    assert.equal((await ended(named.json.run)).status, 'succeeded');
    await control.request('PUT', '/v1/config', { body: { providers: null, default_provider: null } });
  });

  it('runs the Control Plane\'s provider, not the project\'s, when both define the name', async () => {
    const ghost = join(repo.bin, 'ghost.sh');
    writeFileSync(ghost, '#!/bin/sh\ncat > /dev/null\necho operator >> a.txt\n', { mode: 0o755 });
    const put = await control.request('PUT', '/v1/config', {
      body: { providers: { fake: { command: [ghost] } }, default_provider: null },
    });
    assert.equal(put.status, 200, put.text);
    const res = await control.request('POST', '/v1/start', {
      body: { brief: 'whose fake', repo: repo.repo, provider: 'fake' },
    });
    assert.equal(res.status, 202, res.text);
    const run = await ended(res.json.run);
    assert.equal(run.status, 'succeeded', JSON.stringify(run.failure));
    assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8').trim().split('\n').pop(), 'operator');
    await control.request('PUT', '/v1/config', { body: { providers: null } });
  });

  it('starts a provider by any name /v1/config accepts, and refuses a too-long one at both alike', async () => {
    assert.equal(LONG_NAME.length, 40);
    const command = [join(repo.bin, `${LONG_NAME}.sh`)];
    const body = { providers: { [LONG_NAME]: { command } }, default_provider: null };
    const put = await control.request('PUT', '/v1/config', { body });
    assert.equal(put.status, 200, put.text);
    const res = await control.request('POST', '/v1/start', { body: { brief: 'long name', repo: repo.repo, provider: LONG_NAME } });
    assert.equal(res.status, 202, res.text);
    await settled(res.json.run, 'succeeded');

    const tooLong = 'p'.repeat(65);
    const refused = await control.request('PUT', '/v1/config', { body: { providers: { [tooLong]: { command } } } });
    assert.equal(refused.status, 400, refused.text);
    const start = await control.request('POST', '/v1/start', { body: { brief: 'too long', repo: repo.repo, provider: tooLong } });
    assert.equal(start.status, 400, start.text);
    assert.equal(start.json.error.code, 'invalid_param');
  });
});

describe('retention_days', () => {
  let control: TestControl;
  let dbDir: string;
  before(async () => {
    dbDir = mkdtempSync(join(tmpdir(), 'svc-'));
    control = await startTestControl({ settings: { dbPath: join(dbDir, 'control.db') } });
  });
  after(async () => {
    await control.close();
    rmSync(dbDir, { recursive: true, force: true });
  });

  it('keeps every run while the setting is 0', () => {
    const now = Date.now();
    control.deps.stores.runs.upsert('local', makeRun(1, { run: 'rancient', started_at: now - 900 * DAY, ended_at: now - 900 * DAY, updated_at: now - 900 * DAY }));
    assert.equal(pruneExpiredRuns(control.deps, now), 0);
    assert.ok(control.deps.stores.runs.get('local', 'rancient'));
  });

  it('deletes ended runs older than N days with their events and artifacts, keeps the rest, and audits the sweep', async () => {
    const { stores } = control.deps;
    const now = Date.now();
    const old = now - 40 * DAY;
    stores.runs.upsert('local', makeRun(2, { run: 'rold', status: 'succeeded', started_at: old, ended_at: old + 1000, updated_at: old + 1000 }));
    stores.events.insert({ source: 'local', run: 'rold', seq: 1, ts: old, kind: 'log', data: '{}' });
    stores.artifacts.put('local', 'rold', { path: 'a.txt', content_type: 'text/plain', content: Buffer.from('x') });
    stores.runs.upsert('far', makeRun(3, { run: 'roldfar', status: 'failed', started_at: old, ended_at: old, updated_at: old }));
    stores.runs.upsert('local', makeRun(4, { run: 'rstuck', status: 'running', started_at: old, updated_at: old }));
    stores.runs.upsert('local', makeRun(5, { run: 'rlate', status: 'succeeded', started_at: old, ended_at: now - 2 * DAY, updated_at: now - 2 * DAY }));
    stores.runs.upsert('local', makeRun(6, { run: 'rnew', status: 'succeeded', started_at: now - DAY, ended_at: now - DAY, updated_at: now - DAY }));
    assert.equal((await control.request('PUT', '/v1/config', { body: { retention_days: 30 } })).status, 200);

    assert.equal(pruneExpiredRuns(control.deps, now), 3);
    for (const [source, run] of [['local', 'rold'], ['far', 'roldfar'], ['local', 'rancient']]) assert.equal(stores.runs.get(source!, run!), undefined, run);
    for (const run of ['rstuck', 'rlate', 'rnew']) assert.ok(stores.runs.get('local', run), `${run} is kept`);
    assert.equal(stores.events.listAll({ source: 'local', run: 'rold', after: 0, limit: 10 }).length, 0);
    assert.equal(stores.artifacts.list('local', 'rold').length, 0);
    const audit = (await control.request('GET', '/v1/audit?limit=5')).json.items;
    const sweep = audit.find((e: { action: string }) => e.action === 'runs.prune');
    assert.ok(sweep, 'the sweep is in the audit log');
    assert.equal(sweep.actor, 'system');
    assert.equal(sweep.detail.deleted, 3);
    assert.equal(pruneExpiredRuns(control.deps, now), 0, 'a second sweep finds nothing');
  });

  it('sweeps when the Control Plane starts', async () => {
    const now = Date.now();
    control.deps.stores.runs.upsert('local', makeRun(7, { run: 'rboot', started_at: now - 60 * DAY, ended_at: now - 60 * DAY, updated_at: now - 60 * DAY }));
    await control.close();
    control = await startTestControl({ settings: { dbPath: join(dbDir, 'control.db') } });
    assert.equal(control.deps.stores.runs.get('local', 'rboot'), undefined);
    assert.ok(control.deps.stores.runs.get('local', 'rnew'));
  });
});

describe('a launch lost with the Control Plane', () => {
  it('ends failed (infra) at start-up when its launcher never made the run folder, freeing its slot', async () => {
    const repo = makeRepo();
    const dbDir = mkdtempSync(join(tmpdir(), 'svc-'));
    const dbPath = join(dbDir, 'control.db');
    let control = await startTestControl({ env: GIT_ENV, settings: { dbPath }, projects: [repo.repo] });
    try {
      const { runs } = control.deps.stores;
      const old = Date.now() - 10 * 60_000;
      const queued = (i: number, run: string, fields: Record<string, unknown>) =>
        runs.upsert('local', makeRun(i, { run, status: 'queued', verdict: null, repo_path: repo.repo, ...fields }));
      // As a server killed (kill -9) right after it answered POST /v1/start leaves its run when the launcher failed.
      queued(1, 'rlost', { started_at: old, updated_at: old });
      // Its launcher may still be at work: too young to judge.
      queued(2, 'ryoung', { started_at: Date.now(), updated_at: Date.now() });
      // Its launcher made the folder: the run's worker ends it.
      queued(3, 'rmade', { started_at: old, updated_at: old });
      mkdirSync(join(repo.repo, '.svc', 'runs', 'rmade'), { recursive: true });
      // Not launched here.
      runs.upsert('far', makeRun(4, { run: 'rfar', status: 'queued', verdict: null, started_at: old, updated_at: old }));
      await control.close();
      control = await startTestControl({ env: GIT_ENV, settings: { dbPath } });
      const lost = control.deps.stores.runs.get('local', 'rlost')!;
      assert.equal(lost.status, 'failed');
      assert.equal(lost.failure_class, 'infra');
      assert.match(lost.error ?? '', /launcher was lost/);
      assert.notEqual(lost.ended_at, null);
      for (const [source, run] of [['local', 'ryoung'], ['local', 'rmade'], ['far', 'rfar']] as const) {
        assert.equal(control.deps.stores.runs.get(source, run)?.status, 'queued', run);
      }
    } finally {
      await control.close();
      rmSync(dbDir, { recursive: true, force: true });
      repo.cleanup();
    }
  });
});

/** A run folder in `repo` whose state.json says `fields` (ISO times, as the engine writes them). */
function writeRunFolder(repo: string, run: string, fields: Record<string, unknown>): void {
  const dir = join(repo, '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run, repo: 'acme/api', ...fields }));
}

describe('a run that ends while no Control Plane listens', () => {
  it('ends at start-up as its folder says, by the rules an import follows, reading only active runs', async () => {
    const repo = makeRepo();
    const dbDir = mkdtempSync(join(tmpdir(), 'svc-'));
    const dbPath = join(dbDir, 'control.db');
    let control = await startTestControl({ env: GIT_ENV, settings: { dbPath }, projects: [repo.repo] });
    try {
      const { runs } = control.deps.stores;
      const old = Date.now() - 10 * 60_000;
      const running = (i: number, run: string) =>
        runs.upsert('local', makeRun(i, { run, status: 'running', verdict: null, repo_path: repo.repo, started_at: old, updated_at: old }));
      const ended = { status: 'succeeded', started_at: new Date(old).toISOString(), ended_at: new Date().toISOString(), updated_at: new Date().toISOString() };
      // Its worker's last ship failed: the Control Plane was restarting.
      running(1, 'rended');
      writeRunFolder(repo.repo, 'rended', ended);
      // Bound to its runner's key, which this folder lacks: not the run's own folder, so not taken.
      running(2, 'rbound');
      runs.bindKey('local', 'rbound', runKeyDigest('the runner\'s key'));
      writeRunFolder(repo.repo, 'rbound', ended);
      // Not an active run of this server: import alone reads it.
      writeRunFolder(repo.repo, 'runknown', ended);
      await control.close();
      control = await startTestControl({ env: GIT_ENV, settings: { dbPath } });
      const { stores } = control.deps;
      // Read after listen: the Control Plane answers meanwhile.
      await waitFor(() => (stores.runs.get('local', 'rended')?.status === 'succeeded' ? true : null), 'rended to end');
      assert.equal(stores.runs.get('local', 'rbound')?.status, 'running');
      assert.equal(stores.runs.get('local', 'runknown'), undefined);
    } finally {
      await control.close();
      rmSync(dbDir, { recursive: true, force: true });
      repo.cleanup();
    }
  });

  it('is read again at start-up after what its runner shipped, not from its first event', async () => {
    const repo = makeRepo();
    const dbDir = mkdtempSync(join(tmpdir(), 'svc-'));
    const dbPath = join(dbDir, 'control.db');
    let control = await startTestControl({ env: GIT_ENV, settings: { dbPath }, projects: [repo.repo] });
    try {
      const old = Date.now() - 10 * 60_000;
      control.deps.stores.runs.upsert('local', makeRun(1, { run: 'rbig', status: 'running', verdict: null, repo_path: repo.repo, started_at: old, updated_at: old }));
      writeRunFolder(repo.repo, 'rbig', { status: 'succeeded', started_at: new Date(old).toISOString(), ended_at: new Date().toISOString() });
      const line = (seq: number) => `${JSON.stringify({ seq, ts: new Date(old).toISOString(), kind: 'log', data: {} })}\n`;
      const shipped = Array.from({ length: 3_000 }, (_, i) => line(i + 1)).join('');
      const folder = join(repo.repo, '.svc', 'runs', 'rbig');
      writeFileSync(join(folder, 'events.jsonl'), shipped + line(3_001));
      writeFileSync(join(folder, 'ship.json'), JSON.stringify({ events_offset: Buffer.byteLength(shipped), artifacts: {} }));
      await control.close();
      control = await startTestControl({ env: GIT_ENV, settings: { dbPath } });
      const { stores } = control.deps;
      await waitFor(() => (stores.runs.get('local', 'rbig')?.status === 'succeeded' ? true : null), 'rbig to end');
      const events = stores.events.listAll({ after: 0, limit: 10_000, source: 'local', run: 'rbig' });
      assert.deepEqual(events.map((e) => e.seq), [3_001]);
    } finally {
      await control.close();
      rmSync(dbDir, { recursive: true, force: true });
      repo.cleanup();
    }
  });

  it('joins a stop under way only when asked again while stopping; a stop after a resume runs its own after it', async () => {
    const repo = makeRepo();
    const control = await startTestControl({ env: GIT_ENV, projects: [repo.repo] });
    try {
      const old = Date.now() - 10 * 60_000;
      control.deps.stores.runs.upsert('local', makeRun(1, { run: 'rtwice', status: 'stopping', verdict: null, repo_path: repo.repo, started_at: old, updated_at: old }));
      const row = control.deps.stores.runs.get('local', 'rtwice')!;
      const first = control.deps.engine.stop(row);
      assert.equal(control.deps.engine.stop(row, true), first, 'asked again while stopping');
      const second = control.deps.engine.stop(row);
      assert.notEqual(second, first, 'a stop of the resumed run sees its launcher itself');
      await Promise.all([first, second]);
    } finally {
      await control.close();
      repo.cleanup();
    }
  });

  it('is stopped again when asked again while stopping: the stop a Control Plane before took was lost with it', async () => {
    const repo = makeRepo();
    const control = await startTestControl({ env: GIT_ENV, projects: [repo.repo] });
    try {
      const worker = spawn('sleep', ['300']);
      const identity = identityOf(worker.pid!);
      worker.kill('SIGKILL');
      await once(worker, 'exit');
      const old = Date.now() - 10 * 60_000;
      writeRunFolder(repo.repo, 'rlost', {
        status: 'running', provider: 'fake', started_at: new Date(old).toISOString(), updated_at: new Date(old).toISOString(),
        child: null, ...identity,
      });
      control.deps.stores.runs.upsert('local', makeRun(1, { run: 'rlost', status: 'stopping', verdict: null, repo_path: repo.repo, started_at: old, updated_at: old }));
      const res = await control.request('POST', '/v1/runs/local/rlost/stop');
      assert.equal(res.status, 202, res.text);
      const row = await waitFor(() => {
        const stored = control.deps.stores.runs.get('local', 'rlost');
        return stored?.status === 'stopping' ? null : stored;
      }, 'the run to end');
      assert.equal(row?.status, 'failed');
      assert.equal(row?.failure_class, 'infra');
    } finally {
      await control.close();
      repo.cleanup();
    }
  });
});
