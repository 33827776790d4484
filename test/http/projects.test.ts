// Registered projects: POST /v1/import registers a repository, GET /v1/projects lists the registered
// ones, and a run deleted on the Control Plane stays deleted when its runner ships it again.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, type TestRepo } from '../engine/fixtures.ts';

const T0 = '2026-02-01T10:00:00.000Z';

describe('registered projects', () => {
  let cp: TestControl;
  let repo: TestRepo;
  before(async () => {
    cp = await startTestControl({ token: 'projects-token' });
    repo = makeRepo();
  });
  after(async () => {
    await cp.close();
    repo.cleanup();
  });

  it('says a project the repos setting names does not exist, rather than that it is not registered', async () => {
    const gone = join(repo.root, 'gone');
    assert.equal((await cp.request('PUT', '/v1/config', { body: { repos: [gone] } })).status, 200);
    try {
      const res = await cp.request('POST', '/v1/start', { body: { brief: 'x', repo: gone } });
      assert.equal(res.status, 400);
      assert.equal(res.json.error.message, `Project ${JSON.stringify(gone)} does not exist`);
    } finally {
      assert.equal((await cp.request('PUT', '/v1/config', { body: { repos: null } })).status, 200);
    }
  });

  it('says a missing path no project names is not registered, telling nothing of what exists on the host', async () => {
    for (const path of [join(repo.root, 'gone'), '/nonexistent/svc-probe']) {
      const res = await cp.request('POST', '/v1/start', { body: { brief: 'x', repo: path } });
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.match(res.json.error.message, /is not registered with this Control Plane/);
    }
  });

  it('refuses to start a run in a repository before it is imported, naming the import', async () => {
    const res = await cp.request('POST', '/v1/start', { body: { brief: 'x', repo: repo.repo } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
    assert.match(res.json.error.message, /not registered.*POST \/v1\/import/);
    assert.equal(cp.deps.stores.runs.list({ limit: 1 }).length, 0);
  });

  it('registers a git repository without runs on import and lists it under GET /v1/projects', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: repo.repo } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { runs: 0, events: 0, duplicates: 0, artifacts: 0, skipped: [] });
    const list = await cp.request('GET', '/v1/projects');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.items.map((p: { path: string; via: string }) => [p.path, p.via]), [[realpathSync(repo.repo), 'import']]);
    assert.match(list.json.items[0].registered_at, /^\d{4}-\d\d-\d\dT/);
  });

  it('still refuses a folder that is neither a git repository nor holds .svc/runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-'));
    try {
      const res = await cp.request('POST', '/v1/import', { body: { path: dir } });
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.equal((await cp.request('GET', '/v1/projects')).json.items.length, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('drops a deleted run from a later ingest and names it, and an import brings it back', async () => {
    const run = { run: 'rdel', status: 'succeeded', started_at: T0, updated_at: T0, repo: 'acme/api' };
    const events = [{ run: 'rdel', seq: 1, ts: T0, kind: 'log', data: { text: 'a' } }];
    assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'local', runs: [run], events } })).status, 200);
    assert.equal((await cp.request('DELETE', '/v1/runs/local/rdel')).status, 200);
    const again = await cp.request('POST', '/v1/ingest', { body: { source: 'local', runs: [run], events } });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json.deleted, ['rdel']);
    assert.equal(again.json.runs, 0);
    assert.equal((await cp.request('GET', '/v1/runs/local/rdel')).status, 404);
    // Events alone (a later flush) are dropped too instead of failing the batch as an unknown run.
    const late = await cp.request('POST', '/v1/ingest', { body: { source: 'local', events: [{ ...events[0], seq: 2 }] } });
    assert.equal(late.status, 200, late.text);
    assert.deepEqual(late.json.deleted, ['rdel']);

    const project = mkdtempSync(join(tmpdir(), 'svc-'));
    try {
      mkdirSync(join(project, '.svc', 'runs', 'rdel'), { recursive: true });
      writeFileSync(join(project, '.svc', 'runs', 'rdel', 'state.json'), JSON.stringify({ source: 'local', ...run }));
      assert.equal((await cp.request('POST', '/v1/import', { body: { path: project } })).json.runs, 1);
      assert.equal((await cp.request('GET', '/v1/runs/local/rdel')).status, 200);
      assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'local', runs: [run] } })).json.deleted, undefined);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  describe('security', () => {
    it('needs the bearer token to list projects', async () => {
      const res = await cp.request('GET', '/v1/projects', { token: null });
      assert.equal(res.status, 401);
      assert.equal(res.json.error.code, 'unauthorized');
    });
  });
});
