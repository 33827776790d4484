// "A credential goes only to the origin it was made for" (DESIGN §7a), for each client of svc's that sends a token
// with fetch: the GitHub REST calls of a run, the trigger's reports to the Control Plane, the Kubernetes API. A real
// loopback server answers 307 to another loopback port; nothing reaches that port, and the failure names the status.
// (The Control Plane client's own: test/client/client.test.ts; the merge queue's: test/http/merge.test.ts.)
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedirectPair, type RedirectPair } from '../helpers/redirect-pair.ts';
import { commentOnPullRequest } from '../../src/engine/pr.ts';
import { createControlReporter, reportServedRepos } from '../../src/trigger/control-report.ts';
import { createKubeApi } from '../../src/trigger/kubernetes-executor.ts';

const TOKEN = 'tok-not-for-there';

describe('a client that sends a token, answered with a 307', () => {
  let pair: RedirectPair;
  let dir: string;
  before(async () => {
    pair = await startRedirectPair(307);
    dir = mkdtempSync(join(tmpdir(), 'svc-redirect-'));
  });
  after(async () => {
    await pair.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a run's GitHub REST call fails naming the 307, and sends neither the token nor the comment on", async () => {
    const target = { url: 'https://github.example/acme/api.git', repo: 'acme/api' };
    const env = { GITHUB_TOKEN: TOKEN, GITHUB_API_URL: pair.url };
    await assert.rejects(commentOnPullRequest(target, 7, 'the comment', env), /GitHub answered 307/);
    assert.deepEqual(pair.reached, []);
  });

  it("the trigger's reports to the Control Plane are not taken at a 307, and reach nothing there", async () => {
    type Fields = Record<string, unknown> | undefined;
    const warned: Array<[string, Fields]> = [];
    const log = { info: () => {}, warn: (msg: string, fields?: Fields) => void warned.push([msg, fields]) };
    const opts = { controlUrl: pair.url, controlToken: TOKEN, source: 'box', log };
    await createControlReporter(opts)({ job_id: 'j1', message: 'done' } as never);
    const stop = new AbortController();
    // Stopped at its first retry: the 307 was not taken as the report accepted.
    const served = reportServedRepos(['acme/api'], { ...opts, signal: stop.signal,
      log: { ...log, warn: (msg: string, fields?: Fields) => {
        warned.push([msg, fields]);
        stop.abort();
      } } });
    await served;
    assert.deepEqual(warned.map(([, fields]) => fields?.status), [307, 307]);
    assert.deepEqual(pair.reached, []);
  });

  it('a Kubernetes API call answers the 307 to its caller, and sends neither the token nor the Job on', async () => {
    const account = join(dir, 'sa');
    mkdirSync(account);
    writeFileSync(join(account, 'token'), `${TOKEN}\n`);
    const api = createKubeApi({ apiUrl: pair.url, serviceAccountDir: account });
    const res = await api.request('POST', '/apis/batch/v1/namespaces/default/jobs', { kind: 'Job' });
    assert.equal(res.status, 307);
    assert.equal((await api.request('GET', '/apis/batch/v1/namespaces/default/jobs/x')).status, 307);
    assert.deepEqual(pair.reached, []);
  });
});
