// The Control Plane knows the served repositories: the trigger server reports what it serves, a
// job's run carries the routed entry's owner/name (not what its checkout's origin says) through the real `svc start`
// and its shipper, and GET /v1/repos plus the runs filter find it there.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SECRETS, post, get, startTestTrigger, makeRepo, tempDir } from './helpers.ts';
import { startStandIn } from './standins.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startTestControl } from '../helpers/control-server.ts';
import { BadSettingError } from '../../src/errors.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const CP_TOKEN = 'cp-token-repos-1';

function withProvider(repo: string): string {
  mkdirSync(join(repo, '.svc'), { recursive: true });
  const fake = { command: ['sh', '-c', 'echo fixed > fixed.txt'] };
  writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({ provider: 'fake', providers: { fake } }));
  return repo;
}

describe('served repositories on the Control Plane', () => {
  it('reports them at start, and a job\'s run ships under its routed repository\'s name', async () => {
    const cp = await startTestControl({ token: CP_TOKEN });
    const api = withProvider(makeRepo('acme/api'));
    // This checkout's origin names another repository: the run must still be acme/web, the entry it was routed to.
    const web = withProvider(makeRepo('someone/fork'));
    const dir = tempDir('svc-repos-');
    const file = join(dir, 'repos.conf');
    writeFileSync(file, `acme/api checkout=${api} default\nacme/web checkout=${web}\n`);
    const t = await startTestTrigger(
      { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: CP_TOKEN, SVC_SOURCE: 'build-host' },
      { repo: api, reposFile: file, cliPath: CLI },
    );
    try {
      const listed = await waitFor(async () => {
        const items = (await cp.request('GET', '/v1/repos')).json.items as Array<{ name: string; served_by: string[] }>;
        return items.length ? items : null;
      }, 'the served repositories on the Control Plane');
      assert.deepEqual(listed, [
        { name: 'acme/api', served_by: ['build-host'] }, { name: 'acme/web', served_by: ['build-host'] },
      ]);
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'write fixed.txt', repo: 'acme/web' }), bearer);
      assert.equal(res.status, 202);
      const id = res.body.job_id as string;
      const job = await waitFor(async () => {
        const j = (await get(`${t.url}/jobs/${id}`, bearer)).body;
        return j.status !== 'queued' && j.status !== 'running' ? j : null;
      }, 'the real run to end', 60_000);
      assert.equal(job.status, 'succeeded', String(job.error));
      const run = job.run as { source: string; run: string };
      const state = JSON.parse(readFileSync(join(web, '.svc', 'runs', run.run, 'state.json'), 'utf8'));
      assert.equal(state.repo, 'acme/web');
      const shipped = await waitFor(async () => {
        const page = await cp.request('GET', '/v1/runs?repo=acme%2Fweb');
        return page.json.items.find((r: { run: string }) => r.run === run.run) ?? null;
      }, 'the run on the Control Plane under acme/web', 60_000);
      assert.equal(shipped.source, 'build-host');
      const names = ((await cp.request('GET', '/v1/repos')).json.items as Array<{ name: string }>).map((i) => i.name);
      assert.deepEqual(names, ['acme/api', 'acme/web'], 'no name guessed from the checkout');
    } finally {
      await t.jobLoop.idle();
      await t.cleanup();
      await cp.close();
      for (const d of [api, web, dir]) rmSync(d, { recursive: true, force: true });
    }
  });

  it('reports and ships with a runner token read from SVC_CONTROL_TOKEN_FILE (the systemd credential)', async () => {
    const runnerToken = 'runner-token-trigger-0123456789';
    const runnerTokens = [{ source: 'trigger', token: runnerToken }];
    const cp = await startTestControl({ token: CP_TOKEN, settings: { runnerTokens } });
    const api = withProvider(makeRepo('acme/api'));
    const dir = tempDir('svc-repos-');
    const tokenFile = join(dir, 'control-token');
    writeFileSync(tokenFile, `${runnerToken}\n`);
    const t = await startTestTrigger(
      { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN_FILE: tokenFile, SVC_SOURCE: 'trigger' },
      { repo: api, cliPath: CLI },
    );
    try {
      await waitFor(async () => {
        const items = (await cp.request('GET', '/v1/repos')).json.items as Array<{ name: string }>;
        return items.length ? items : null;
      }, 'the served repositories on the Control Plane');
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'write fixed.txt' }), bearer);
      assert.equal(res.status, 202);
      const id = res.body.job_id as string;
      const job = await waitFor(async () => {
        const j = (await get(`${t.url}/jobs/${id}`, bearer)).body;
        return j.status !== 'queued' && j.status !== 'running' ? j : null;
      }, 'the real run to end', 60_000);
      assert.equal(job.status, 'succeeded', String(job.error));
      const run = job.run as { source: string; run: string };
      const shipped = await waitFor(async () => {
        const page = await cp.request('GET', '/v1/runs?repo=acme%2Fapi');
        return page.json.items.find((r: { run: string }) => r.run === run.run) ?? null;
      }, 'the run on the Control Plane', 60_000);
      assert.equal(shipped.source, 'trigger');
    } finally {
      await t.jobLoop.idle();
      await t.cleanup();
      await cp.close();
      for (const d of [api, dir]) rmSync(d, { recursive: true, force: true });
    }
  });

  it('under the Kubernetes executor, several repositories need a clone= URL each (a pod cannot use a host checkout)', async () => {
    const api = makeRepo('acme/api');
    const dir = tempDir('svc-repos-');
    const file = join(dir, 'repos.conf');
    writeFileSync(file, `acme/api checkout=${api} default\nacme/web clone=https://github.com/acme/web.git\n`);
    try {
      await assert.rejects(
        startTestTrigger(
          { SVC_TRIGGER_EXECUTOR: 'kubernetes', SVC_K8S_IMAGE: 'svc:1' }, { repo: api, reposFile: file, home: dir },
        ),
        (err: Error) => err instanceof BadSettingError && /acme\/api only have a checkout=/.test(err.message),
      );
    } finally {
      for (const d of [api, dir]) rmSync(d, { recursive: true, force: true });
    }
  });

  it('retries the report until the Control Plane takes it', async () => {
    const control = await startStandIn(null);
    let answered = 0;
    control.respond = () => (++answered === 1 ? { status: 503, body: '{}' } : { status: 200, body: '{}' });
    const t = await startTestTrigger(
      { SVC_CONTROL_URL: control.url, SVC_CONTROL_TOKEN: CP_TOKEN, SVC_SOURCE: 'build-host' },
      { servedRetryMs: [5] },
    );
    try {
      await waitFor(() => t.logs.find((l) => l.msg === 'served repositories reported to the Control Plane'), 'accepted');
      assert.equal(control.requests.length, 2);
      for (const r of control.requests) {
        assert.equal(r.path, '/v1/ingest');
        assert.equal(r.headers.authorization, `Bearer ${CP_TOKEN}`);
        assert.deepEqual(JSON.parse(r.body), { source: 'build-host', served_repos: [{ name: 'acme/api' }] });
      }
      assert.ok(t.logs.some((l) => l.msg === 'Control Plane did not take the served repositories; retrying'));
    } finally {
      await t.cleanup();
      await control.close();
    }
  });
});
