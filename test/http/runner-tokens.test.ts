// Runner tokens (SVC_CONTROL_RUNNER_TOKENS_FILE): POST /v1/ingest for their own source, nothing else.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { parseRunnerTokens, readRunnerTokens, RunnerTokensError } from '../../src/control/settings.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';

const MAIN = 'main-token-0123456789abcdefghijkl';
const K8S = 'k8s-runner-token-0123456789abcdef';
const CI = 'ci-runner-token-0123456789abcdefgh';

function batch(source: string, run: string) {
  const t = '2026-11-25T00:00:00.000Z';
  return { source, runs: [{ run, status: 'running', started_at: t, updated_at: t, brief: 'shipped' }], events: [], artifacts: [] };
}

describe('runner tokens', () => {
  let cp: TestControl;

  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'k8s', token: K8S }, { source: 'ci', token: CI }] } });
  });
  after(() => cp.close());

  it('ship their own source\u2019s runs through POST /v1/ingest', async () => {
    const res = await cp.request('POST', '/v1/ingest', { token: K8S, body: batch('k8s', 'r1') });
    assert.equal(res.status, 200, res.text);
    assert.equal(cp.deps.stores.runs.get('k8s', 'r1')?.brief, 'shipped');
    const ci = await cp.request('POST', '/v1/ingest', { token: CI, body: batch('ci', 'r2') });
    assert.equal(ci.status, 200, ci.text);
  });

  it('may not ship another source\u2019s runs: 403 forbidden_source, nothing written', async () => {
    const res = await cp.request('POST', '/v1/ingest', { token: K8S, body: batch('local', 'r3') });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.json.error.code, 'forbidden_source');
    assert.equal(cp.deps.stores.runs.get('local', 'r3'), undefined);
  });

  it('open no other route: reads, config, stop and delete answer 401', async () => {
    for (const [method, path, body] of [
      ['GET', '/v1/runs', undefined], ['GET', '/v1/runs/k8s/r1', undefined], ['GET', '/v1/config', undefined],
      ['PUT', '/v1/config', { max_concurrent_runs: 9 }], ['POST', '/v1/runs/k8s/r1/stop', {}], ['DELETE', '/v1/runs/ci/r2', undefined],
      ['GET', '/v1/audit', undefined], ['POST', '/v1/merge/run', {}],
    ] as const) {
      const res = await cp.request(method, path, { token: K8S, ...(body === undefined ? {} : { body }) });
      assert.equal(res.status, 401, `${method} ${path}: ${res.text}`);
      assert.equal(res.json.error.code, 'unauthorized');
    }
  });

  it('leave the server\u2019s own token working for every source, and refuse a wrong or missing token', async () => {
    assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body: batch('local', 'r4') })).status, 200);
    assert.equal((await cp.request('POST', '/v1/ingest', { token: `${K8S}x`, body: batch('k8s', 'r5') })).status, 401);
    assert.equal((await cp.request('POST', '/v1/ingest', { token: '', body: batch('k8s', 'r5') })).status, 401);
    assert.equal((await cp.request('GET', '/v1/runs', { token: MAIN })).status, 200);
  });

  it('are recorded in the audit log as the runner that shipped', async () => {
    const audit = await cp.request('GET', '/v1/audit?limit=50', { token: MAIN });
    const actors = (audit.json.items as Array<{ action: string; actor: string }>).filter((e) => e.action === 'runs.ingest').map((e) => e.actor);
    assert.ok(actors.includes('runner:k8s'), JSON.stringify(actors));
  });
});

describe('SVC_CONTROL_RUNNER_TOKENS_FILE', () => {
  it('reads "<source> <token>" lines, skipping blanks and comments', () => {
    assert.deepEqual(parseRunnerTokens(`# runners\n\nk8s ${K8S}\n  ci   ${CI}  \n`), [{ source: 'k8s', token: K8S }, { source: 'ci', token: CI }]);
  });

  it('refuses a bad line, a bad source, a short token and a token given twice, naming the line and never the token', () => {
    const cases: Array<[string, RegExp]> = [
      [`k8s\n`, /line 1 must be/], [`k8s ${K8S} extra\n`, /line 1 must be/], [`../x ${K8S}\n`, /not a valid source/],
      [`k8s short\n`, /at least 24/], [`k8s ${K8S}\nci ${K8S}\n`, /line 2: this token is already given/],
    ];
    for (const [text, message] of cases) {
      assert.throws(() => parseRunnerTokens(text), (err: Error) => err instanceof RunnerTokensError && message.test(err.message)
        && !err.message.includes(K8S));
    }
  });

  it('is read at start: unset means none, unreadable is an error, and tokens need the server\u2019s own token', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-runners-'));
    try {
      assert.deepEqual(readRunnerTokens(undefined), []);
      assert.throws(() => readRunnerTokens(join(dir, 'missing')), /could not be read \(ENOENT\)/);
      const file = join(dir, 'runners');
      writeFileSync(file, `k8s ${K8S}\n`);
      const env = { HOME: dir, SVC_CONTROL_RUNNER_TOKENS_FILE: file };
      assert.throws(() => resolveControlSettings(env, {}), /need SVC_CONTROL_TOKEN/);
      assert.throws(() => resolveControlSettings({ ...env, SVC_CONTROL_TOKEN: K8S }, {}), /equals SVC_CONTROL_TOKEN/);
      assert.deepEqual(resolveControlSettings({ ...env, SVC_CONTROL_TOKEN: MAIN }, {}).runnerTokens, [{ source: 'k8s', token: K8S }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
