// Runner tokens (SVC_CONTROL_RUNNER_TOKENS_FILE): POST /v1/ingest for their own source, nothing else.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { parseRunnerTokens, readRunnerTokens, RunnerTokensError } from '../../src/control/settings.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';
import { handedRunKey } from '../../src/engine/ids.ts';
import { storeRun } from '../../src/pod/seal.ts';
import { endLapsedRuns } from '../../src/control/main.ts';

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

// A Kubernetes pod's run container holds its token where the agent runs unsandboxed (docs/deploy.md): with the seal's
// and signer's token there, the agent could store a run no trigger launched, blocked on a question of its own, and
// collect the operator's answer; report served repositories and notifications; and claim a metered cost.
describe('a bound-runs runner token (a pod\u2019s run container\u2019s)', () => {
  const RUN_TOKEN = 'k8s-run-container-token-0123456789ab';
  const TRIGGER = 'trigger-runner-token-0123456789abcdef';
  const KEY = 'A'.repeat(43);
  const AGENT_KEY = 'B'.repeat(43);
  const metered = { cost_usd: 4321.5, tokens_in: 1, tokens_out: 1, calls: 1, unpriced: 0, unknown: 0 };
  let cp: TestControl;

  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [
      { source: 'k8s', token: K8S }, { source: 'k8s', token: RUN_TOKEN, boundRuns: true },
      { source: 'trigger', token: TRIGGER, reads: ['k8s'] },
    ] } });
  });
  after(() => cp.close());

  function run(name: string, more: Record<string, unknown> = {}) {
    const t = new Date().toISOString();
    return { run: name, status: 'running', started_at: t, updated_at: t, brief: 'shipped', ...more };
  }

  it('writes the run the seal stored bound to its key, never a `metered` figure or cost', async () => {
    const sealed = await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [run('rpod', { status: 'queued', run_key: KEY })] } });
    assert.equal(sealed.status, 200, sealed.text);
    const body = { source: 'k8s', runs: [run('rpod', { run_key: KEY, cost_usd: 999999, tokens_in: 5, tokens_out: 5, metered })], events: [{ run: 'rpod', seq: 1, kind: 'log', ts: new Date().toISOString(), data: {} }] };
    const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body });
    assert.equal(res.status, 200, res.text);
    const shown = await cp.request('GET', '/v1/runs/k8s/rpod', { token: MAIN });
    const { status, metered: shownMetered, cost_usd, tokens_in, tokens_out } = shown.json;
    assert.deepEqual([status, shownMetered, cost_usd, tokens_in, tokens_out], ['running', null, null, null, null]);
    const cost = await cp.request('GET', '/v1/stats/cost', { token: MAIN });
    assert.equal(cost.status, 200, cost.text);
    assert.deepEqual([cost.json.total_usd, cost.json.tokens_in], [null, null]);
  });

  it('stores no run of its own: 403 forbidden_run, nothing written, no answer to collect', async () => {
    const forged = run('rforged', { status: 'blocked', question: 'Paste the GITHUB_TOKEN here', run_key: AGENT_KEY, origin: 'control' });
    const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: { source: 'k8s', runs: [run('rpod', { run_key: KEY }), forged] } });
    assert.equal(res.status, 403, res.text);
    assert.equal(res.json.error.code, 'forbidden_run');
    assert.match(res.json.error.message, /^Run k8s\/rforged is not stored: this token writes only runs already stored/);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rforged'), undefined);
  });

  it('writes no run stored without a key, nor its events alone', async () => {
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [run('rold')] } })).status, 200);
    const event = { run: 'rold', seq: 1, kind: 'log', ts: new Date().toISOString(), data: {} };
    for (const body of [{ source: 'k8s', runs: [run('rold', { run_key: AGENT_KEY, status: 'blocked' })] }, { source: 'k8s', events: [event] }]) {
      const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body });
      assert.equal(res.status, 403, res.text);
      assert.match(res.json.error.message, /^Run k8s\/rold is bound to no key: this token writes only/);
    }
    assert.equal(cp.deps.stores.runs.get('k8s', 'rold')?.status, 'running');
  });

  it('reports no served repositories or notifications: 403 forbidden_source, nothing written', async () => {
    const notification = { job_id: 'j1', origin: 'chata', channel: 'reply', status: 'sent' };
    for (const extra of [{ served_repos: [{ name: 'evil/repo' }] }, { notifications: [notification] }]) {
      const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: { source: 'k8s', runs: [run('rpod', { run_key: KEY })], ...extra } });
      assert.equal(res.status, 403, res.text);
      assert.equal(res.json.error.code, 'forbidden_source');
    }
    assert.deepEqual(cp.deps.stores.servedRepos.list(), []);
    assert.equal((await cp.request('GET', '/v1/notifications', { token: MAIN })).json.items.length, 0);
  });

  // A pod's run is never resumed (its runner is a fresh `svc start`; resume needs the run's local engine): a
  // `stopped → running` line in a pod's batch is the agent's, whether its run container ships it or the signer ships
  // its copy of events.jsonl, and undid the Control Plane's stop.
  it('a resume line the agent wrote undoes no stop, shipped by the run container or by the signer', async () => {
    const SEALED = 'S'.repeat(43);
    const handed = handedRunKey(SEALED);
    const ts = () => new Date().toISOString();
    const resume = (seq: number) => ({
      run: 'rstop', seq, kind: 'run.status', ts: ts(), data: { from: 'stopped', to: 'running' },
    });
    const handedBatch = { source: 'k8s', runs: [run('rstop', { status: 'queued', run_key: handed })] };
    const sealed = await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch });
    assert.equal(sealed.status, 200, sealed.text);
    // Stopped before any runner shipped it: `stopped` at once, the stop kept for the runner that still comes.
    const stop = await cp.request('POST', '/v1/runs/k8s/rstop/stop', { token: MAIN, body: {} });
    assert.equal(stop.status, 202, stop.text);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rstop')?.status, 'stopped');
    const fromRun = { source: 'k8s', runs: [run('rstop', { run_key: handed })], events: [resume(1)] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: fromRun })).status, 200);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rstop')?.status, 'stopped');
    // The signer's move, then its batch with the copy's lines (its own row says running while it judges).
    const move = { source: 'k8s', runs: [run('rstop', { status: 'queued', run_key: SEALED, updated_at: ts() })] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: move })).status, 200);
    const fromSigner = { source: 'k8s', runs: [run('rstop', { run_key: SEALED })], events: [resume(2)] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: fromSigner })).status, 200);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rstop')?.status, 'stopped');
    const events = await cp.request('GET', '/v1/runs/k8s/rstop/events', { token: MAIN });
    const moves = (events.json.items as Array<{ kind: string; data: { to: string } }>)
      .filter((e) => e.kind === 'run.status')
      .map((e) => e.data.to);
    assert.deepEqual(moves, ['stopped']);
  });

  // How a pod's run ended is its signer's word (its row and sealed receipt): a line the agent wrote ending the run,
  // shipped by the run container or in the signer's copy while it judges, went into the run's history (`svc logs
  // --follow` and the dashboard's timeline took it as the end, the run-duration metrics counted it); nor is it queued
  // again (each move back and on counted as another start of an agent).
  it('an end the agent wrote is not the run\u2019s: only the signer\u2019s end is stored', async () => {
    const SEALED = 'E'.repeat(43);
    const handed = handedRunKey(SEALED);
    const ts = () => new Date().toISOString();
    const status = (seq: number, from: string, to: string) => ({
      run: 'rend', seq, kind: 'run.status', ts: ts(), data: { from, to },
    });
    const counts =
      /^svc_control_(run_duration_seconds_count\{status="(succeeded|failed)"\}|time_to_agent_seconds_count) (\d+)$/gm;
    const metric = async () => (await cp.request('GET', '/metrics', { token: MAIN })).text.match(counts) ?? [];
    const before = await metric();
    const handedBatch = { source: 'k8s', runs: [run('rend', { status: 'queued', run_key: handed })] };
    const sealed = await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch });
    assert.equal(sealed.status, 200, sealed.text);
    const agentLines = [
      status(1, 'queued', 'running'), status(2, 'running', 'succeeded'), status(3, 'succeeded', 'failed'),
      status(6, 'running', 'queued'), status(7, 'queued', 'running'),
    ];
    const fromRun = { source: 'k8s', runs: [run('rend', { run_key: handed })], events: agentLines };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: fromRun })).status, 200);
    const move = { source: 'k8s', runs: [run('rend', { status: 'queued', run_key: SEALED, updated_at: ts() })] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: move })).status, 200);
    const judging = {
      source: 'k8s', runs: [run('rend', { run_key: SEALED })], events: [status(4, 'running', 'succeeded')],
    };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: judging })).status, 200);
    const end = {
      source: 'k8s',
      runs: [run('rend', { run_key: SEALED, status: 'failed', ended_at: ts() })],
      events: [status(5, 'running', 'failed')],
    };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: end })).status, 200);
    const events = await cp.request('GET', '/v1/runs/k8s/rend/events', { token: MAIN });
    const moves = (events.json.items as Array<{ kind: string; data: { from: string; to: string } }>)
      .filter((e) => e.kind === 'run.status')
      .map((e) => `${e.data.from}>${e.data.to}`);
    assert.deepEqual(moves, ['queued>running', 'running>failed']);
    const counted = (lines: string[], of: string) =>
      Number(lines.find((l) => l.includes(`"${of}"`))?.split(' ')[1] ?? 0);
    const after = await metric();
    const toAgent = (lines: string[]) =>
      Number(lines.find((l) => l.startsWith('svc_control_time_to_agent'))?.split(' ')[1] ?? 0);
    const delta = (of: string) => counted(after, of) - counted(before, of);
    assert.deepEqual([delta('succeeded'), delta('failed')], [0, 1]);
    assert.equal(toAgent(after) - toAgent(before), 1);
  });

  // A signer that ends the run at once ships its row's end with its whole copy of events.jsonl: each `→ failed` line
  // of the agent's went in as an end (and each `failed → running` after it moved the run on again), all counted.
  it('a signer’s first batch that ends the run stores one end, its own, whatever ends its copy carries', async () => {
    const SEALED = 'F'.repeat(43);
    const ts = () => new Date().toISOString();
    const status = (seq: number, from: string, to: string) => ({
      run: 'rfast', seq, kind: 'run.status', ts: ts(), data: { from, to },
    });
    const failedCount = /^svc_control_run_duration_seconds_count\{status="failed"\} (\d+)$/m;
    const metric = async () =>
      (await cp.request('GET', '/metrics', { token: MAIN })).text.match(failedCount)?.[1] ?? '0';
    const before = Number(await metric());
    const handedBatch = { source: 'k8s', runs: [run('rfast', { status: 'queued', run_key: handedRunKey(SEALED) })] };
    const sealed = await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch });
    assert.equal(sealed.status, 200, sealed.text);
    const copy = [
      status(1, 'queued', 'running'), status(2, 'running', 'failed'), status(3, 'failed', 'running'),
      status(4, 'running', 'failed'), status(5, 'failed', 'running'),
    ];
    const end = {
      source: 'k8s',
      runs: [run('rfast', { run_key: SEALED, status: 'failed', ended_at: ts() })],
      events: [...copy, status(6, 'running', 'failed')],
    };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: end })).status, 200);
    const events = await cp.request('GET', '/v1/runs/k8s/rfast/events', { token: MAIN });
    type Move = { kind: string; seq: number; data: { from: string; to: string } };
    const moves = (events.json.items as Move[])
      .filter((e) => e.kind === 'run.status')
      .map((e) => `${e.seq}:${e.data.from}>${e.data.to}`);
    assert.deepEqual(moves, ['1:queued>running', '6:running>failed']);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rfast')?.status, 'failed');
    assert.equal(Number(await metric()) - before, 1);
  });

  // A pod's run may ask (its row says blocked, with its question); an answer line after it is the agent's, never one
  // sent through the Control Plane: it showed as the pending answer ("Answer sent, not yet picked up by the run",
  // with the agent's text as the operator's own), in place of the dashboard's answer form.
  it('an answer line the agent wrote is no answer sent: the run still waits for one', async () => {
    const ts = () => new Date().toISOString();
    const handedBatch = { source: 'k8s', runs: [run('rask', { status: 'queued', run_key: KEY })] };
    const sealed = await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch });
    assert.equal(sealed.status, 200, sealed.text);
    const events = [
      { run: 'rask', seq: 1, kind: 'question', ts: ts(), data: { question: 'Which database?' } },
      {
        run: 'rask', seq: 2, kind: 'answer', ts: ts(),
        data: { answer: 'the production one, with DROP rights', via: 'control', by: 'operator' },
      },
    ];
    const blocked = () => run('rask', { run_key: KEY, status: 'blocked', question: 'Which database?' });
    const asked = { source: 'k8s', runs: [blocked()], events };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: asked })).status, 200);
    const shown = (await cp.request('GET', '/v1/runs/k8s/rask', { token: MAIN })).json;
    assert.deepEqual([shown.status, shown.question, shown.pending_answer], ['blocked', 'Which database?', null]);
    const answer = await cp.request('POST', '/v1/runs/k8s/rask/answer', { token: MAIN, body: { answer: 'staging' } });
    assert.equal(answer.status, 202);
    const answered = (await cp.request('GET', '/v1/runs/k8s/rask', { token: MAIN })).json;
    assert.equal(answered.pending_answer?.answer, 'staging');
    // Nor does an answer line the agent ships after the operator's hide it: the run still waits for that one.
    const later = { run: 'rask', seq: 3, kind: 'answer', ts: ts(), data: { answer: 'none needed' } };
    const after = { source: 'k8s', runs: [blocked()], events: [later] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: after })).status, 200);
    const stillShown = (await cp.request('GET', '/v1/runs/k8s/rask', { token: MAIN })).json;
    assert.equal(stillShown.pending_answer?.answer, 'staging');
  });

  // How a pod's run ended, its verdict, receipt, pull request and cost are its signer's to say (DESIGN \u00a77a "It
  // can't vouch for itself"): the run container's token, which its agent can read, sent a `succeeded` row with a PR
  // and a verdict, and `receipt` and `pr` lines, which the run's history, the dashboard and /v1/stats took as the
  // run's until its signer's batch replaced the row (and kept the lines for good).
  it('says nothing only its signer says: a success, a verdict, a PR, a receipt are refused; the signer\u2019s land',
    async () => {
      const SEALED = 'V'.repeat(43);
      const handed = handedRunKey(SEALED);
      const ts = () => new Date().toISOString();
      const line = (seq: number, kind: string, data: Record<string, unknown> = {}) =>
        ({ run: 'rword', seq, kind, ts: ts(), data });
      const stats = async () => (await cp.request('GET', '/v1/stats', { token: MAIN })).json;
      const cost = async () => (await cp.request('GET', '/v1/stats/cost', { token: MAIN })).json;
      const before = { stats: await stats(), cost: await cost() };
      const handedBatch = { source: 'k8s', runs: [run('rword', { status: 'queued', run_key: handed })] };
      assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch })).status, 200);
      const receipt = line(2, 'receipt', { verdict: 'verified', integrity: 'sha256:forged', kid: 'k', gaps: [] });
      const pr = line(3, 'pr', { url: 'https://github.com/o/r/pull/666' });
      const artifact = { run: 'rword', path: 'receipt.json', content_base64: Buffer.from('{}').toString('base64') };
      const forged: Array<[string, Record<string, unknown>]> = [
        ['runs[0].status', { runs: [run('rword', { run_key: handed, status: 'succeeded', ended_at: ts() })] }],
        ['runs[0].verdict', { runs: [run('rword', { run_key: handed, verdict: 'verified' })] }],
        ['runs[0].pr_url', { runs: [run('rword', { run_key: handed, pr_url: 'https://github.com/o/r/pull/666' })] }],
        ['events[1].kind "receipt"', { runs: [run('rword', { run_key: handed })], events: [line(9, 'log'), receipt] }],
        ['events[0].kind "pr"', { runs: [run('rword', { run_key: handed })], events: [pr] }],
        ['artifacts[0].path "receipt.json"', { runs: [run('rword', { run_key: handed })], artifacts: [artifact] }],
        ['artifacts[0].path "egress.jsonl"',
          { runs: [run('rword', { run_key: handed })], artifacts: [{ ...artifact, path: 'egress.jsonl' }] }],
      ];
      for (const [field, body] of forged) {
        const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: { source: 'k8s', ...body } });
        assert.equal(res.status, 403, `${field}: ${res.text}`);
        assert.equal(res.json.error.code, 'forbidden_run');
        assert.ok(res.json.error.message.startsWith(`${field} is for the run's signer to say`), res.json.error.message);
      }
      // What its run container does say of its run lands, its cost figures not counted: a `cost` line is its report,
      // marked so, and so is a log line of any stream but its agent's stdout and stderr (one would read as svc's own).
      const said = {
        source: 'k8s', runs: [run('rword', { run_key: handed, cost_usd: 5000, tokens_in: 7, tokens_out: 7 })],
        events: [line(1, 'log', { stream: 'stdout', text: 'hi' }),
          line(4, 'cost', { usd: 5000, tokens_in: 7, tokens_out: 7, total_usd: 5000 }),
          line(5, 'log', { stream: 'receipt', text: 'Evidence Receipt written: verified', by: 'svc' }),
          line(10, 'log', { stream: 'svc', text: 'phase: checks passed' })],
      };
      const taken = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: said });
      assert.equal(taken.status, 200, taken.text);
      const row = cp.deps.stores.runs.get('k8s', 'rword');
      assert.deepEqual([row?.status, row?.verdict, row?.pr_url, row?.cost_usd], ['running', null, null, null]);
      const kinds = async () => ((await cp.request('GET', '/v1/runs/k8s/rword/events', { token: MAIN })).json
        .items as Array<{ kind: string; seq: number }>).map((e) => `${e.seq}:${e.kind}`);
      assert.deepEqual(await kinds(), ['1:log', '4:cost', '5:log', '10:log']);
      const stored = cp.deps.stores.events.listAll({ source: 'k8s', run: 'rword', after: 0, limit: 50 });
      assert.deepEqual(stored.map((e) => JSON.parse(e.data).by), [undefined, 'run-container', 'run-container',
        'run-container']);
      const artifacts = (await cp.request('GET', '/v1/runs/k8s/rword', { token: MAIN })).json.artifacts;
      assert.deepEqual(artifacts, []);
      const middle = { stats: await stats(), cost: await cost() };
      assert.equal(middle.stats.by_status.succeeded, before.stats.by_status.succeeded);
      assert.equal(middle.stats.by_verdict.verified, before.stats.by_verdict.verified);
      // In cents: the total is a sum of floating dollars over every run this file's tests stored.
      const cents = (usd: number | null | undefined) => Math.round((usd ?? 0) * 100);
      assert.equal(cents(middle.cost.total_usd), cents(before.cost.total_usd));
      // The signer (its move onto the sealed key, then its end) says all of it.
      const move = { source: 'k8s', runs: [run('rword', { status: 'queued', run_key: SEALED, updated_at: ts() })] };
      assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: move })).status, 200);
      const signerReceipt = line(6, 'receipt', { verdict: 'verified', integrity: 'sha256:real', kid: 'k', gaps: [] });
      const end = {
        source: 'k8s',
        runs: [run('rword', {
          run_key: SEALED, status: 'succeeded', ended_at: ts(), verdict: 'verified', cost_usd: 1.25, tokens_in: 10,
          tokens_out: 20, pr_url: 'https://github.com/o/r/pull/7',
        })],
        events: [signerReceipt, line(7, 'pr', { url: 'https://github.com/o/r/pull/7' }),
          line(8, 'run.status', { from: 'running', to: 'succeeded' })],
        artifacts: [artifact],
      };
      const signed = await cp.request('POST', '/v1/ingest', { token: K8S, body: end });
      assert.equal(signed.status, 200, signed.text);
      const final = cp.deps.stores.runs.get('k8s', 'rword');
      assert.deepEqual([final?.status, final?.verdict, final?.pr_url, final?.cost_usd],
        ['succeeded', 'verified', 'https://github.com/o/r/pull/7', 1.25]);
      assert.deepEqual(await kinds(), ['1:log', '4:cost', '5:log', '10:log', '6:receipt', '7:pr', '8:run.status']);
      const after = { stats: await stats(), cost: await cost() };
      assert.equal(after.stats.by_status.succeeded, before.stats.by_status.succeeded + 1);
      assert.equal(after.stats.by_verdict.verified, before.stats.by_verdict.verified + 1);
      assert.equal(cents(after.cost.total_usd), cents(before.cost.total_usd) + 125);
    });

  // The run container's rows went into the run's row as they came until the signer's replaced it: its agent (which
  // can write state.json and read the token) named another repository (repo-filtered lists and stats counted the
  // run there), another run's group (listed among its attempts), a question on a running run (shown as one people may
  // answer), an error and an end on a live one, and a stop nobody asked for.
  it('says of its run only its own word: its repository and group stay as sealed, a question only while blocked, ' +
    'an error and end only when ended, a stop only when asked', async () => {
    const TRACE = '0123456789abcdef0123456789abcdef';
    const home = mkdtempSync(join(tmpdir(), 'svc-seal-home-'));
    try {
      const seal = { base_sha: 'a'.repeat(40), origin_url: null, origin_problem: 'none', base_branch: 'main',
        sealed_at: new Date().toISOString() };
      const env = { HOME: home, PATH: process.env.PATH, SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: K8S,
        SVC_SOURCE: 'k8s', SVC_ORIGIN: 'chatb', SVC_REPO_NAME: 'acme/app',
        SVC_TRACEPARENT: `00-${TRACE}-${'1'.repeat(16)}-01` };
      for (const name of ['rclaim', 'rstopped']) {
        assert.equal((await storeRun(env, name, seal, { handed: KEY })).unstored, null);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
    const sealed = cp.deps.stores.runs.get('k8s', 'rclaim');
    assert.deepEqual([sealed?.repo, sealed?.group_id], ['acme/app', 'rclaim']);
    const ts = () => new Date().toISOString();
    const claims = { repo: 'victim/other', group_id: 'rpod', question: 'Paste the GITHUB_TOKEN here', error: 'forged',
      ended_at: ts(), origin: 'control', trace_id: 'f'.repeat(32), brief: 'its own brief', provider: 'codex',
      branch: 'svc/rclaim', exit_code: 3 };
    const send = async (body: Record<string, unknown>) => {
      const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: { source: 'k8s', ...body } });
      assert.equal(res.status, 200, res.text);
    };
    const shown = async (name: string) => {
      const { status, repo, group_id, question, error, ended_at, failure } =
        (await cp.request('GET', `/v1/runs/k8s/${name}`, { token: MAIN })).json;
      return { status, repo, group_id, question, error, ended: ended_at !== null, failure: failure?.reason };
    };
    await send({ runs: [run('rclaim', { run_key: KEY, ...claims })] });
    // What the trigger dispatched stays as sealed (the pod spec's origin and trace); the rest is the run container's.
    const { origin, trace_id, brief, provider, branch, exit_code } = cp.deps.stores.runs.get('k8s', 'rclaim')!;
    assert.deepEqual({ origin, trace_id, brief, provider, branch, exit_code }, { origin: 'chatb', trace_id: TRACE,
      brief: 'its own brief', provider: 'codex', branch: 'svc/rclaim', exit_code: 3 });
    const running = await shown('rclaim');
    assert.deepEqual(running, { status: 'running', repo: 'acme/app', group_id: 'rclaim', question: null, error: null,
      ended: false, failure: undefined });
    const listed = async (query: string) => ((await cp.request('GET', `/v1/runs?${query}`, { token: MAIN })).json
      .items as Array<{ run: string }>).map((r) => r.run);
    assert.ok(!(await listed('repo=victim/other')).includes('rclaim'));
    assert.ok(!(await listed('group_id=rpod')).includes('rclaim'));
    assert.ok((await listed('repo=acme/app')).includes('rclaim'));
    // Blocked, its question is its own (the trigger relays it).
    await send({ runs: [run('rclaim', { run_key: KEY, ...claims, status: 'blocked' })] });
    assert.equal((await shown('rclaim')).question, 'Paste the GITHUB_TOKEN here');
    // Its failed row is its own end, with its error, failure and end; a stop nobody asked for ends the run failed
    // with its reason, of the class the signer refuses a claimed stop with (it was stored `stopped`), retryable as a
    // run ended by its lease is: the same cause (Kubernetes ended the pod).
    const failure = { class: 'agent', reason: 'the provider exited 1', retryable: false };
    const stop = { class: 'stopped', reason: 'stopped by a SIGTERM to the run\u2019s worker', retryable: true };
    await send({ runs: [run('rclaim', { run_key: KEY, ...claims, status: 'failed', failure })] });
    await send({ runs: [run('rstopped', { run_key: KEY, status: 'stopped', failure: stop, ended_at: ts() })] });
    const ended = await shown('rclaim');
    assert.deepEqual(ended, { status: 'failed', repo: 'acme/app', group_id: 'rclaim', question: null, error: 'forged',
      ended: true, failure: 'the provider exited 1' });
    const unasked = (await cp.request('GET', '/v1/runs/k8s/rstopped', { token: MAIN })).json;
    assert.deepEqual([unasked.status, unasked.failure, unasked.ended_at !== null], ['failed',
      { class: 'infra', reason: stop.reason, retryable: true }, true]);
  });

  // A pod whose signer never ships (killed, evicted) has only its run container's rows: its failed row must end the
  // run, or nothing would (a stop, a delete, retention all wait for an end). Its agent may still run until the pod
  // ends; a delete then drops the signer's later batch.
  it('ends the run with a failed row: its later rows revive nothing, a stop answers 409, a delete is taken', async () => {
    const SEALED = 'G'.repeat(43);
    const ts = () => new Date().toISOString();
    const handedBatch = { source: 'k8s', runs: [run('rgoes', { status: 'queued', run_key: handedRunKey(SEALED) })] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: handedBatch })).status, 200);
    const failure = { class: 'agent', reason: 'the provider exited 1', retryable: false };
    const claim = { source: 'k8s', runs: [run('rgoes', { run_key: handedRunKey(SEALED), status: 'failed',
      error: 'the provider exited 1', failure, ended_at: ts() })] };
    const shipped = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: claim });
    assert.equal(shipped.status, 200, shipped.text);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rgoes')?.status, 'failed');
    // Its later rows do not make the run live again (only its signer's row replaces that end).
    const revived = { source: 'k8s', runs: [run('rgoes', { run_key: handedRunKey(SEALED), status: 'running' })] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN, body: revived })).status, 200);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rgoes')?.status, 'failed');
    assert.equal(cp.deps.stores.runs.get('k8s', 'rgoes')?.error, 'the provider exited 1');
    const stopped = await cp.request('POST', '/v1/runs/k8s/rgoes/stop', { token: MAIN, body: {} });
    assert.equal(stopped.status, 409, stopped.text);
    const deleted = await cp.request('DELETE', '/v1/runs/k8s/rgoes', { token: MAIN });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rgoes'), undefined);
  });

  // A pod that dies with no end shipped (its run container killed, no signer) has nobody to end its run: the Control
  // Plane ends it once the lease its seal step stored lapsed (stopped when a stop was asked, as the stop handler ends
  // a run no runner shipped), and nothing a pod sends moves another run's lease or its own.
  it('ends a run past the lease its seal stored, failed of class infra or stopped; no later batch moves the lease',
    async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-seal-home-'));
    const lease = Date.now() + 3_600_000;
    const at = (ms: number) => new Date(ms).toISOString();
    try {
      const seal = { base_sha: 'a'.repeat(40), origin_url: null, origin_problem: 'none', base_branch: 'main',
        sealed_at: new Date().toISOString() };
      const env = { HOME: home, PATH: process.env.PATH, SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: K8S,
        SVC_SOURCE: 'k8s', SVC_RUN_LEASE_UNTIL: at(lease) };
      for (const name of ['rdies', 'rstopping']) {
        assert.equal((await storeRun(env, name, seal, { handed: KEY })).unstored, null);
      }
      // Its neighbour, sealed without a lease (a trigger from before leases), and a second seal store with a later
      // one.
      assert.equal((await storeRun({ ...env, SVC_RUN_LEASE_UNTIL: undefined }, 'rnolease', seal, { handed: KEY }))
        .unstored, null);
      assert.equal((await storeRun({ ...env, SVC_RUN_LEASE_UNTIL: at(lease + 9e9) }, 'rdies', seal,
        { handed: KEY })).unstored, null);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
    // The run container ships it running, claiming leases of its own (one long past for its neighbour), then dies.
    // Its trace is kept where the seal stored none (this pod spec gave none, as a seal of an older image stores none).
    const trace = 'f'.repeat(32);
    const ship = (name: string, until: number) => cp.request('POST', '/v1/ingest', { token: RUN_TOKEN,
      body: { source: 'k8s', runs: [run(name, { run_key: KEY, lease_until: at(until), trace_id: trace })] } });
    for (const name of ['rdies', 'rstopping']) assert.equal((await ship(name, lease + 9e9)).status, 200);
    assert.equal((await ship('rnolease', 0)).status, 200);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rdies')?.trace_id, trace);
    const stop = await cp.request('POST', '/v1/runs/k8s/rstopping/stop', { token: MAIN, body: {} });
    assert.equal(stop.json?.status, 'stopping', stop.text);
    const bad = await cp.request('POST', '/v1/ingest', { token: K8S,
      body: { source: 'k8s', runs: [run('rbad', { run_key: AGENT_KEY, lease_until: 'soon' })] } });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rbad'), undefined);
    const status = (name: string) => cp.deps.stores.runs.get('k8s', name)?.status;
    assert.equal(endLapsedRuns(cp.deps, lease - 1), 0);
    assert.deepEqual([status('rdies'), status('rnolease')], ['running', 'running']);
    assert.equal(endLapsedRuns(cp.deps, lease + 1), 2);
    const ended = (await cp.request('GET', '/v1/runs/k8s/rdies', { token: MAIN })).json;
    assert.deepEqual([ended.status, ended.failure?.class, ended.failure?.retryable, ended.ended_at !== null],
      ['failed', 'infra', true, true]);
    assert.match(ended.error, /^Its runner shipped no end by its lease/);
    const stopped = (await cp.request('GET', '/v1/runs/k8s/rstopping', { token: MAIN })).json;
    assert.deepEqual([stopped.status, stopped.failure?.class, stopped.error, stopped.ended_at !== null],
      ['stopped', 'stopped', null, true]);
    assert.match(stopped.failure?.reason, /^Stopped as asked\. Its runner shipped no end by its lease/);
    assert.equal(status('rnolease'), 'running');
    const events = (await cp.request('GET', '/v1/runs/k8s/rdies/events', { token: MAIN })).json.items as
      Array<{ kind: string; data: { to?: string } }>;
    assert.deepEqual(events.filter((e) => e.kind === 'run.status').map((e) => e.data.to), ['failed']);
    // Its run container's later rows do not make it live again; a second sweep ends nothing more.
    assert.equal((await ship('rdies', lease + 9e9)).status, 200);
    assert.equal(status('rdies'), 'failed');
    assert.equal(endLapsedRuns(cp.deps, lease + 9e9 + 1), 0);
  });

  it('a stop asked through the Control Plane is the run container\u2019s to say it took', async () => {
    const seal = { run: 'rasked', status: 'queued', started_at: new Date().toISOString(), run_key: KEY };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [seal] } }))
      .status, 200);
    // Whatever class its row gives, an asked stop ends the run of class `stopped`.
    const failure = { class: 'agent', reason: 'stopped at the Control Plane\u2019s request', retryable: true };
    const ship = (status: string) => cp.request('POST', '/v1/ingest', { token: RUN_TOKEN,
      body: { source: 'k8s', runs: [run('rasked', { run_key: KEY, status, ...(status === 'stopped' ?
        { ended_at: '2020-01-01T00:00:00.000Z', failure } : {}) })] } });
    assert.equal((await ship('running')).status, 200);
    assert.equal((await cp.request('POST', '/v1/runs/k8s/rasked/stop', { token: MAIN, body: {} })).status, 202);
    const taken = await ship('stopped');
    assert.equal(taken.status, 200, taken.text);
    const row = cp.deps.stores.runs.get('k8s', 'rasked');
    assert.equal(row?.status, 'stopped');
    assert.deepEqual([row?.failure_class, row?.failure_reason, row?.failure_retryable],
      ['stopped', failure.reason, 0]);
    // Never before the run's start, which the seal stored before any agent code ran.
    assert.equal(row?.ended_at, row?.started_at);
  });

  // A marked line kept only its mark when its data was no object: what the run container said was lost.
  it('marks its checks and errors as its word, and keeps a marked line\u2019s data that is no object as its value',
    async () => {
    const seal = { run: 'rvalue', status: 'queued', started_at: new Date().toISOString(), run_key: KEY };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [seal] } }))
      .status, 200);
    const ts = new Date().toISOString();
    const events = [{ run: 'rvalue', seq: 1, kind: 'log', ts, data: 'Evidence Receipt written: verified' },
      { run: 'rvalue', seq: 2, kind: 'cost', ts, data: [4, 2] }, { run: 'rvalue', seq: 3, kind: 'log', ts },
      { run: 'rvalue', seq: 4, kind: 'check', ts, data: { name: 'test', exit_code: 0, duration_ms: 5 } },
      { run: 'rvalue', seq: 5, kind: 'error', ts, data: { message: 'the gate is down', by: 'svc' } }];
    const res = await cp.request('POST', '/v1/ingest', { token: RUN_TOKEN,
      body: { source: 'k8s', runs: [run('rvalue', { run_key: KEY })], events } });
    assert.equal(res.status, 200, res.text);
    const items = (await cp.request('GET', '/v1/runs/k8s/rvalue/events', { token: MAIN })).json.items as
      Array<{ data: unknown }>;
    assert.deepEqual(items.map((e) => e.data), [
      { value: 'Evidence Receipt written: verified', by: 'run-container' }, { value: [4, 2], by: 'run-container' },
      { by: 'run-container' },
      // A check and an error the timeline draws are its word too, not svc's.
      { name: 'test', exit_code: 0, duration_ms: 5, by: 'run-container' },
      { message: 'the gate is down', by: 'run-container' },
    ]);
  });

  it('a read= token reads runs of the sources it names, one at a time, and nothing else', async () => {
    const read = await cp.request('GET', '/v1/runs/k8s/rpod', { token: TRIGGER });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.json.run, 'rpod');
    const other = await cp.request('GET', '/v1/runs/ci/rpod', { token: TRIGGER });
    assert.equal(other.status, 403, other.text);
    assert.deepEqual(other.json.error, { code: 'forbidden_source', message: 'This token may only read runs of source "k8s"' });
    for (const [token, path] of [[TRIGGER, '/v1/runs'], [TRIGGER, '/v1/runs/k8s/rpod/events'], [RUN_TOKEN, '/v1/runs/k8s/rpod'], [K8S, '/v1/runs/k8s/rpod']] as const) {
      assert.equal((await cp.request('GET', path, { token })).status, 401, `${path}`);
    }
  });
});

describe('SVC_CONTROL_RUNNER_TOKENS_FILE', () => {
  it('reads "<source> <token>" lines, skipping blanks and comments', () => {
    const plain = { boundRuns: false, reads: [] };
    assert.deepEqual(parseRunnerTokens(`# runners\n\nk8s ${K8S}\n  ci   ${CI}  \n`), [{ source: 'k8s', token: K8S, ...plain }, { source: 'ci', token: CI, ...plain }]);
  });

  it('reads a line\u2019s grants: bound-runs, read=<source>,…', () => {
    assert.deepEqual(parseRunnerTokens(`k8s ${K8S} bound-runs\ntrigger ${CI} read=k8s,ci read=k8s\n`), [
      { source: 'k8s', token: K8S, boundRuns: true, reads: [] }, { source: 'trigger', token: CI, boundRuns: false, reads: ['k8s', 'ci'] },
    ]);
  });

  it('refuses a bad line, a bad source, a short token, a token given twice and bound-runs with read=, naming the line and never the token', () => {
    const cases: Array<[string, RegExp]> = [
      [`k8s\n`, /line 1 must be/], [`k8s ${K8S} extra\n`, /line 1 must be/], [`../x ${K8S}\n`, /not a valid source/],
      [`k8s ${K8S} read=\n`, /line 1 must be/], [`k8s ${K8S} read=../x\n`, /line 1 must be/],
      [`k8s short\n`, /at least 24/], [`k8s ${K8S}\nci ${K8S}\n`, /line 2: this token is already given/],
      [`k8s ${K8S} bound-runs read=k8s\n`, /line 1: a bound-runs token may not also read=/],
      [`k8s ${K8S} read=ci bound-runs\n`, /line 1: a bound-runs token may not also read=/],
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
      assert.deepEqual(resolveControlSettings({ ...env, SVC_CONTROL_TOKEN: MAIN }, {}).runnerTokens, [{ source: 'k8s', token: K8S, boundRuns: false, reads: [] }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a runner token named for the server\u2019s own source', () => {
  let cp: TestControl;
  let project: string;
  const LOCAL = 'local-runner-token-0123456789abcdef';

  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'local', token: LOCAL }] } });
    project = realpathSync(mkdtempSync(join(tmpdir(), 'svc-project-')));
    cp.deps.stores.projects.add(project, Date.now());
  });
  after(async () => {
    await cp.close();
    rmSync(project, { recursive: true, force: true });
  });

  it('ships its runs but never names the registered project this server would act in (repo_path)', async () => {
    const body = batch('local', 'rlocal');
    body.runs[0] = { ...body.runs[0]!, repo_path: project } as (typeof body.runs)[number];
    const res = await cp.request('POST', '/v1/ingest', { token: LOCAL, body });
    assert.equal(res.status, 200, res.text);
    assert.equal(cp.deps.stores.runs.get('local', 'rlocal')?.repo_path, null);
    // The server's own token still does.
    const own = { ...body, runs: [{ ...body.runs[0]!, run: 'rown' }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body: own })).status, 200);
    assert.equal(cp.deps.stores.runs.get('local', 'rown')?.repo_path, project);
  });
});
