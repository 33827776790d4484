// POST /v1/runs/{source}/{run}/pr: a --pr run whose work was verified but whose pull request could not be opened (the
// GitHub API refused the token while it finished) gets it from the Control Plane once the API takes the token again.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, EDIT_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const POLICY = { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'], required: true }] };

describe('POST /v1/runs/{source}/{run}/pr', () => {
  let api: Server;
  let accepting = false;
  const pulls: Array<{ path: string; body: any }> = [];
  let control: TestControl;
  let repo: TestRepo;

  before(async () => {
    // A GitHub API stand-in that refuses the token until the test lets it through.
    api = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        if (!accepting) return void res.writeHead(401).end('{"message":"Bad credentials"}');
        pulls.push({ path: req.url ?? '', body: JSON.parse(text) });
        res.writeHead(201).end(JSON.stringify({ number: pulls.length, html_url: `https://github.example/acme/api/pull/${pulls.length}` }));
      });
    });
    await new Promise<void>((r) => api.listen(0, '127.0.0.1', () => r()));
    repo = makeRepo({ policy: POLICY, providers: { fake: EDIT_SCRIPT } });
    const apiUrl = `http://127.0.0.1:${(api.address() as { port: number }).port}`;
    control = await startTestControl({ env: { GITHUB_API_URL: apiUrl, GITHUB_TOKEN: 'gh-later-token', ...GIT_ENV }, projects: [repo.repo] });
  });
  after(async () => {
    await control.close();
    await new Promise((r) => api.close(r));
    repo.cleanup();
  });

  async function settled(source: string, run: string, test: (r: any) => boolean, what: string) {
    return waitFor(async () => {
      const r = (await control.request('GET', `/v1/runs/${source}/${run}`)).json;
      return r && test(r) ? r : null;
    }, what);
  }

  it('opens the pull request of a verified run that could not open it, then refuses a second time', async () => {
    const started = await control.request('POST', '/v1/start', { body: { brief: 'append fixed', repo: repo.repo, provider: 'fake', pr: true } });
    assert.equal(started.status, 202);
    const { source, run } = started.json;
    const failed = await settled(source, run, (r) => r.status === 'failed', 'the run to fail opening its PR');
    assert.equal(failed.verdict, 'verified');
    assert.match(failed.error, /Pull request not opened: GitHub answered 401/);
    assert.equal(failed.refusals.pr, null, 'run detail offers the action');

    accepting = true;
    const res = await control.request('POST', `/v1/runs/${source}/${run}/pr`, { body: {} });
    assert.equal(res.status, 202);
    const done = await settled(source, run, (r) => r.status === 'succeeded', 'the run to succeed with its PR');
    assert.match(done.pr_url, /\/acme\/api\/pull\/1$/);
    assert.equal(done.error, null);
    assert.equal(pulls.length, 1);
    assert.equal(pulls[0]!.path, '/repos/acme/api/pulls');
    assert.equal(pulls[0]!.body.head, `svc/${run}`);
    assert.ok(existsSync(join(repo.origin, 'refs', 'heads', 'svc', run)));
    const audit = (await control.request('GET', '/v1/audit?limit=50')).json.items;
    assert.ok(audit.some((e: { action: string; target: string }) => e.action === 'run.pr' && e.target === `${source}/${run}`), 'audited');

    const again = await control.request('POST', `/v1/runs/${source}/${run}/pr`, { body: {} });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, 'invalid_transition');
    assert.equal(pulls.length, 1);
  });

  it('refuses a run that was not started with --pr', async () => {
    const started = await control.request('POST', '/v1/start', { body: { brief: 'no pr', repo: repo.repo, provider: 'fake', pr: false } });
    const { source, run } = started.json;
    await settled(source, run, (r) => r.status === 'succeeded' || r.status === 'failed', 'the run to end');
    const res = await control.request('POST', `/v1/runs/${source}/${run}/pr`, { body: {} });
    assert.equal(res.status, 409);
    assert.equal(res.json.error.code, 'invalid_transition');
  });
});
