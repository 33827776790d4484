// The repositories trigger servers serve: reported in an ingest batch's served_repos, kept per
// source, listed by GET /v1/repos beside the names runs carry, so the UI's filter offers them before any run.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

const MAIN = 'main-token-served-1';
const K8S = 'k8s-runner-token-served-2';

describe('served repositories on the Control Plane', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'k8s', token: K8S }] } });
  });
  after(() => cp.close());

  const served = (source: string, names: unknown[], token: string = MAIN) =>
    cp.request('POST', '/v1/ingest', { body: { source, served_repos: names.map((name) => ({ name })) }, token });
  const repos = async (): Promise<Array<{ name: string; served_by: string[] }>> =>
    (await cp.request('GET', '/v1/repos')).json.items;

  it('lists what each source reports, merged with run repositories, and a new report replaces the old list', async () => {
    const first = await served('build-host', ['acme/api', 'acme/web', 'acme/infra']);
    assert.equal(first.status, 200);
    assert.equal(first.json.served_repos, 3);
    assert.equal((await served('k8s', ['acme/web'], K8S)).status, 200);
    const run = { run: 'r1', status: 'succeeded', repo: 'acme/api', started_at: '2026-01-01T00:00:00Z' };
    assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'build-host', runs: [run] } })).status, 200);
    assert.deepEqual(await repos(), [
      { name: 'acme/api', served_by: ['build-host'] },
      { name: 'acme/infra', served_by: ['build-host'] },
      { name: 'acme/web', served_by: ['build-host', 'k8s'] },
    ]);
    // acme/infra left the file: the server's next start reports without it.
    assert.equal((await served('build-host', ['acme/api', 'acme/web'])).status, 200);
    assert.deepEqual((await repos()).map((r) => r.name), ['acme/api', 'acme/web']);
    // A batch without served_repos (a run, a notification) leaves the list alone.
    const more = await cp.request('POST', '/v1/ingest', { body: { source: 'build-host', runs: [{ ...run, run: 'r2' }] } });
    assert.equal(more.json.served_repos, undefined);
    assert.deepEqual((await repos()).find((r) => r.name === 'acme/web')?.served_by, ['build-host', 'k8s']);
    // The runs filter the UI applies with a listed name finds that repository's runs.
    const page = await cp.request('GET', '/v1/runs?repo=acme%2Fapi');
    assert.deepEqual(page.json.items.map((r: { run: string }) => r.run).sort(), ['r1', 'r2']);
  });

  it('refuses a bad list whole, changing nothing', async () => {
    const before = await repos();
    for (const names of [['acme/api', '../etc'], ['acme/api', 'ACME/api'], ['acme/web.git'], [42]]) {
      const res = await served('build-host', names);
      assert.equal(res.status, 400, JSON.stringify(names));
      assert.equal(res.json.error.code, 'invalid_param');
    }
    const extra = await cp.request('POST', '/v1/ingest', {
      body: { source: 'build-host', served_repos: [{ name: 'acme/api', path: '/srv/acme/api' }] },
    });
    assert.equal(extra.status, 400);
    const many = await served('build-host', Array.from({ length: 1001 }, (_, i) => `acme/r${i}`));
    assert.equal(many.status, 400);
    assert.deepEqual(await repos(), before);
  });

  it('a runner token reports only its own source', async () => {
    const res = await served('build-host', ['evil/planted'], K8S);
    assert.equal(res.status, 403);
    assert.equal((await repos()).some((r) => r.name === 'evil/planted'), false);
  });
});
