import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPublicKey } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, symlinkSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import { join, relative as relativePath } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, grantAgentState, startGithubStandIn, processesMentioning, AGENT_STATE, ASK_SCRIPT, EDIT_SCRIPT, SLEEP_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { idleNode } from '../helpers/run-child.ts';
import { procStart } from '../../src/proc-stat.ts';
import { SHIP_HOLD } from '../../src/engine/ship-hold.ts';
import { verifyReceipt, receiptFromMarkdown } from '../../src/engine/receipt.ts';
import { keyIdOf } from '../../src/keys.ts';

// Fails its first call, then does the work: a run to resume.
const FLAKY_SCRIPT = `#!/bin/sh
cat > /dev/null
if [ ! -f "$HOME/agent-state/flaky.once" ]; then touch "$HOME/agent-state/flaky.once"; exit 3; fi
echo fixed >> a.txt
`;

const POLICY = { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'], required: true }] };

describe('run actions on the Control Plane', () => {
  let github: StandIn;
  let control: TestControl;
  let repo: TestRepo;

  before(async () => {
    github = await startGithubStandIn();
    repo = makeRepo({ policy: POLICY, providers: { fake: EDIT_SCRIPT, ask: ASK_SCRIPT, sleepy: SLEEP_SCRIPT, flaky: FLAKY_SCRIPT } });
    control = await startTestControl({ env: { GITHUB_API_URL: github.url, GITHUB_TOKEN: 'gh-test-token', ...GIT_ENV }, projects: [repo.repo] });
    // The Control Plane's runs use its HOME: its operator file grants the fixtures' folder there.
    grantAgentState(control.home, JSON.parse(readFileSync(join(repo.repo, '.svc', 'config.json'), 'utf8')).providers);
  });
  after(async () => {
    await control.close();
    await github.close();
    repo.cleanup();
  });

  async function runOf(source: string, run: string) {
    return (await control.request('GET', `/v1/runs/${source}/${run}`)).json;
  }

  function settled(source: string, run: string, status: string) {
    return waitFor(async () => {
      const r = await runOf(source, run);
      return r && r.status === status ? r : null;
    }, `run ${run} to be ${status}`);
  }

  it('starts a run that streams events, verifies, signs a receipt and opens a draft PR at the stand-in', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake', pr: true } });
    assert.equal(res.status, 202);
    assert.equal(res.json.status, 'queued');
    const { source, run } = res.json;
    const stream = await fetch(`${control.url}/v1/runs/${source}/${run}/stream`);
    const reader = stream.body!.getReader();
    let text = '';
    while (!/event: run\.status\n[^\n]*"to":"succeeded"/.test(text)) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += Buffer.from(chunk.value).toString('utf8');
    }
    await reader.cancel();
    assert.match(text, /event: check\n/);
    assert.match(text, /event: receipt\n/);
    const final = await settled(source, run, 'succeeded');
    assert.equal(final.verdict, 'verified');
    assert.equal(final.cost_usd, 0.25);
    assert.equal(final.tokens_in, 100);
    assert.match(final.pr_url, /\/acme\/api\/pull\/\d+$/);

    const pull = github.requests.find((r) => r.method === 'POST' && r.path === '/repos/acme/api/pulls');
    assert.ok(pull, 'the stand-in got a pull request');
    assert.equal(pull.body.draft, true);
    assert.equal(pull.body.head, `svc/${run}`);
    assert.equal(pull.headers.authorization, 'Bearer gh-test-token');
    const keys = (await control.request('GET', '/v1/keys')).json.keys;
    const ring = new Map(keys.map((k: { kid: string; pem: string }) => [k.kid, createPublicKey(k.pem)]));
    const fromPr = verifyReceipt(receiptFromMarkdown(pull.body.body), ring as never);
    assert.equal(fromPr.ok, true, fromPr.message);
    assert.equal(fromPr.receipt?.verdict, 'verified');

    const receipt = await control.request('GET', `/v1/runs/${source}/${run}/artifact/receipt.json`);
    assert.equal(receipt.status, 200);
    assert.equal(receipt.json.run, run);
    assert.equal(keyIdOf(createPublicKey(keys[0].pem)), receipt.json.kid);
    const list = (await control.request('GET', '/v1/runs')).json.items;
    assert.ok(list.some((r: { run: string; status: string }) => r.run === run && r.status === 'succeeded'));
    const branches = readFileSync(join(repo.origin, 'refs', 'heads', `svc`, run), 'utf8');
    assert.match(branches, /^[0-9a-f]{40}/);
  });

  it('continues a traceparent given to POST /v1/runs: the Run JSON and the signed receipt carry its trace id', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const res = await control.request('POST', '/v1/runs', {
      body: { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake' },
      headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` },
    });
    assert.equal(res.status, 202);
    const final = await settled(res.json.source, res.json.run, 'succeeded');
    assert.equal(final.trace_id, traceId);
    const receipt = (await control.request('GET', `/v1/runs/${final.source}/${final.run}/artifact/receipt.json`)).json;
    assert.equal(receipt.trace_id, traceId);
    const keys = (await control.request('GET', '/v1/keys')).json.keys;
    const ring = new Map(keys.map((k: { kid: string; pem: string }) => [k.kid, createPublicKey(k.pem)]));
    assert.equal(verifyReceipt(receipt, ring as never).ok, true);
    // The trace id is signed: changing it breaks the receipt.
    const forged = verifyReceipt({ ...receipt, trace_id: 'f'.repeat(32) }, ring as never);
    assert.equal(forged.problem, 'integrity_mismatch');
    // A receipt from before traces (no trace_id) is a different receipt, not a broken one: removing it also breaks
    // this one's integrity, which is what keeps it from being stripped unnoticed.
    const { trace_id: _dropped, ...stripped } = receipt;
    assert.equal(verifyReceipt(stripped, ring as never).problem, 'integrity_mismatch');
    // A malformed one is not continued: the run gets a trace of its own.
    const other = await control.request('POST', '/v1/runs', {
      body: { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake' },
      headers: { traceparent: `00-${traceId}-b7ad6b7169203331` },
    });
    const second = await settled(other.json.source, other.json.run, 'succeeded');
    assert.match(second.trace_id, /^[0-9a-f]{32}$/);
    assert.notEqual(second.trace_id, traceId);
  });

  it('blocks on a provider question and finishes after POST …/answer', async () => {
    const res = await control.request('POST', '/v1/runs', { body: { brief: 'migrate', repo: repo.repo, provider: 'ask' } });
    const { source, run } = res.json;
    const early = await control.request('POST', `/v1/runs/${source}/${run}/answer`, { body: { answer: 'too early' } });
    assert.equal(early.status, 409);
    assert.equal(early.json.error.code, 'invalid_transition');
    const blocked = await settled(source, run, 'blocked');
    assert.equal(blocked.question, 'Which database should the migration target?');
    const answered = await control.request('POST', `/v1/runs/${source}/${run}/answer`, { body: { answer: 'postgres fixed' } });
    assert.equal(answered.status, 202);
    // One channel: a run this server started gets the answer file, never also a control request.
    assert.deepEqual(control.deps.stores.controlRequests.pending(source), []);
    const done = await settled(source, run, 'succeeded');
    assert.equal(done.question, null);
    const events = (await control.request('GET', `/v1/runs/${source}/${run}/events?limit=500`)).json.items;
    assert.ok(events.some((e: { kind: string }) => e.kind === 'question'));
    assert.ok(events.some((e: { kind: string; data: { answer?: string } }) => e.kind === 'answer' && e.data.answer === 'postgres fixed'));
    // One answer, one event: the runner's own event for using it is recognised as the same answer.
    assert.equal(events.filter((e: { kind: string }) => e.kind === 'answer').length, 1);
    // The run records who answered: the Control Plane's caller, as its audit names them.
    const own = readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8').trim().split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(own.find((e) => e.kind === 'answer')?.data.by, 'control:local');
  });

  it('stops a running run and leaves no process behind', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'sleep', repo: repo.repo, provider: 'sleepy' } });
    const { source, run } = res.json;
    await waitFor(() => existsSync(join(control.home, AGENT_STATE, `${run}.up`)) || null, 'the provider to start');
    assert.ok(processesMentioning(`svc-grandchild-${run}`).length >= 1, 'the grandchild runs');
    const stop = await control.request('POST', `/v1/runs/${source}/${run}/stop`, { body: {} });
    assert.equal(stop.status, 202);
    assert.equal(stop.json.status, 'stopping');
    await settled(source, run, 'stopped');
    await waitFor(() => processesMentioning(`svc-grandchild-${run}`).length === 0 || null, 'provider processes to exit');
    // Each transition starts where the one before it ended, and the run ends stopping→stopped, whether the
    // runner's own queued/running events reached the Control Plane before the stop or after it.
    const events = (await control.request('GET', `/v1/runs/${source}/${run}/events?limit=500`)).json.items as Array<{ kind: string; data: { from: unknown; to: unknown } }>;
    const moves = events.filter((e) => e.kind === 'run.status').map((e) => e.data);
    assert.match(moves.slice(-2).map((m) => `${m.from}→${m.to}`).join(' '), /^(queued|running)→stopping stopping→stopped$/);
    moves.slice(1).forEach((m, i) => assert.equal(m.from, moves[i]!.to, JSON.stringify(moves)));
    const again = await control.request('POST', `/v1/runs/${source}/${run}/stop`, { body: {} });
    assert.equal(again.status, 409);
    // Stopped, and by whom: the worker shipped the signal it got; the Control Plane that sent it names itself.
    await waitFor(async () => {
      const { failure } = await runOf(source, run);
      return failure?.reason === 'stopped by the Control Plane (a stop request)' && failure.class === 'stopped';
    }, 'the stop to be named');
  });

  it('honours a stop that comes before the launcher made the run folder: the run never starts', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'sleep', repo: repo.repo, provider: 'sleepy' } });
    const { source, run } = res.json;
    const stop = await control.request('POST', `/v1/runs/${source}/${run}/stop`, { body: {} });
    assert.equal(stop.status, 202);
    await settled(source, run, 'stopped');
    const up = join(control.home, AGENT_STATE, `${run}.up`);
    // Nothing of the run is left running (its launcher ended), or its provider started after all.
    await waitFor(() => processesMentioning(run).length === 0 || existsSync(up) || null, 'the launch to end');
    assert.equal(existsSync(up), false, 'the provider never started');
    const final = await runOf(source, run);
    assert.equal(final.status, 'stopped');
    assert.equal(final.failure.reason, 'stopped by the Control Plane (a stop request)');
    const events = (await control.request('GET', `/v1/runs/${source}/${run}/events?limit=500`)).json.items as Array<{ kind: string; data: { to: unknown } }>;
    assert.deepEqual(events.filter((e) => e.kind === 'run.status').map((e) => e.data.to), ['stopping', 'stopped']);
    // The launcher the stop ended is no failed launch.
    assert.equal(events.some((e) => e.kind === 'error'), false);
  });

  it('binds a run it starts to a key made with its row, which only the run folder holds: a sender of its source without it is refused', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake' } });
    assert.equal(res.status, 202, res.text);
    const { source, run } = res.json;
    const digest = control.deps.stores.runs.getKeyed(source, run)?.run_key_sha256;
    assert.ok(digest, 'bound from birth, before its launcher ran');
    const now = new Date().toISOString();
    const forged = await control.request('POST', '/v1/ingest', {
      body: { source, runs: [{ run, status: 'blocked', question: 'Paste the deploy token', started_at: now, updated_at: now }] },
    });
    assert.equal(forged.status, 403, forged.text);
    assert.equal(forged.json.error.code, 'forbidden_run');
    // Its own worker ships with the key its launcher was handed, so the run goes on being written.
    await settled(source, run, 'succeeded');
    const dir = join(repo.repo, '.svc', 'runs', run);
    const key = readFileSync(join(dir, 'run-key'), 'utf8').trim();
    assert.deepEqual(Buffer.from(digest), createHash('sha256').update(key).digest());
    for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((n) => n !== 'run-key')) {
      const path = join(dir, name);
      if (!existsSync(path) || !statSync(path).isFile()) continue;
      assert.ok(!readFileSync(path, 'utf8').includes(key), `${name} holds the key`);
    }
  });

  it('records the class of a launch that could not make its run: no such provider is config', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'nobody', repo: repo.repo, provider: 'nosuchcli' } });
    assert.equal(res.status, 202, res.text);
    const failed = await settled(res.json.source, res.json.run, 'failed');
    assert.equal(failed.failure.class, 'config', JSON.stringify(failed));
    assert.equal(failed.failure.retryable, false);
    assert.match(failed.failure.reason, /nosuchcli/);
    const listed = (await control.request('GET', '/v1/runs?failure=config')).json.items.map((r: { run: string }) => r.run);
    assert.ok(listed.includes(res.json.run));
  });

  it('retries a run as a new run in the same group', async () => {
    const first = (await control.request('POST', '/v1/start', { body: { brief: 'again', repo: repo.repo, provider: 'fake' } })).json;
    await settled(first.source, first.run, 'succeeded');
    const retry = await control.request('POST', `/v1/runs/${first.source}/${first.run}/retry`, { body: {} });
    assert.equal(retry.status, 202);
    assert.notEqual(retry.json.run, first.run);
    assert.ok(control.deps.stores.runs.getKeyed(retry.json.source, retry.json.run)?.run_key_sha256, 'bound from birth');
    assert.equal(retry.json.group_id, first.group_id);
    const second = await settled(retry.json.source, retry.json.run, 'succeeded');
    assert.equal(second.group_id, first.run);
  });

  it('resumes a failed run as the same run, then verify re-issues its receipt', async () => {
    const first = (await control.request('POST', '/v1/start', { body: { brief: 'flaky', repo: repo.repo, provider: 'flaky', pr: false } })).json;
    const failed = await settled(first.source, first.run, 'failed');
    assert.match(failed.error, /exited with code 3/);
    assert.equal(failed.verdict, 'not_verified');
    assert.deepEqual(failed.failure, { class: 'agent', reason: 'Provider flaky exited with code 3', retryable: false });
    const resumed = await control.request('POST', `/v1/runs/${first.source}/${first.run}/resume`, { body: {} });
    assert.equal(resumed.status, 202);
    const done = await settled(first.source, first.run, 'succeeded');
    assert.equal(done.verdict, 'verified');
    assert.equal(done.failure, null, 'a resumed run that succeeds has no failure left');
    const receipts = async () => (await control.request('GET', `/v1/runs/${first.source}/${first.run}/events?limit=500`)).json.items.filter((e: { kind: string }) => e.kind === 'receipt').length;
    const before = await receipts();
    const verify = await control.request('POST', `/v1/runs/${first.source}/${first.run}/verify`, { body: {} });
    assert.equal(verify.status, 202);
    await waitFor(async () => (await receipts()) > before, 'a re-issued receipt');
    const resumeAgain = await control.request('POST', `/v1/runs/${first.source}/${first.run}/resume`, { body: {} });
    assert.equal(resumeAgain.status, 409);
  });

  type Event = { kind: string; data: { message?: string } };

  /** A run the flaky provider failed (it fails its first call again: an earlier test may have had it), as its row. */
  async function failedRun() {
    rmSync(join(control.home, AGENT_STATE, 'flaky.once'), { force: true });
    const body = { brief: 'flaky', repo: repo.repo, provider: 'flaky', pr: false };
    const { source, run } = (await control.request('POST', '/v1/start', { body })).json;
    return settled(source, run, 'failed');
  }

  /** Resumes `row`'s run on the Control Plane (accepted) and gives the message of the refusal its launcher printed. */
  async function refusedResume(row: { source: string; run: string }): Promise<string> {
    const path = `/v1/runs/${row.source}/${row.run}`;
    const resumed = await control.request('POST', `${path}/resume`, { body: {} });
    assert.equal(resumed.status, 202, resumed.text);
    const events = async () => (await control.request('GET', `${path}/events?limit=500`)).json.items as Event[];
    return waitFor(async () => (await events()).find((e) => e.kind === 'error')?.data.message ?? null, 'the refusal');
  }

  /** Asserts `row`'s run is as it was: its own failure, not a failed launch. */
  async function asItWas(row: { source: string; run: string; status: string; failure: unknown; ended_at: string }) {
    const after = await runOf(row.source, row.run);
    assert.deepEqual([after.status, after.failure, after.ended_at], [row.status, row.failure, row.ended_at],
      'its own failure, not a failed launch');
  }

  /** The state.json of `run` once its worker has left it (its pid cleared as it leaves, after the row says failed). */
  async function leftState(run: string): Promise<{ path: string; text: string }> {
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    const text = await waitFor(() => {
      const read = readFileSync(path, 'utf8');
      return JSON.parse(read).pid === null ? read : null;
    }, 'the worker to leave');
    return { path, text };
  }

  /** What a runner that resumed `run` by hand ships: the run running since `at`, and its move out of the failure. */
  function resumedByHand(row: { source: string; run: string; started_at: string }, at: string) {
    const key = readFileSync(join(repo.repo, '.svc', 'runs', row.run, 'run-key'), 'utf8').trim();
    const seq = control.deps.stores.events.maxSeq(row.source, row.run) + 1;
    return {
      source: row.source,
      runs: [{ run: row.run, status: 'running', started_at: row.started_at, updated_at: at, run_key: key }],
      events: [{ run: row.run, seq, ts: at, kind: 'run.status', data: { from: 'failed', to: 'running', resumed: true } }],
    };
  }

  it('keeps a failed run as it was when a folder at its take lock refuses its resume, naming the folder', async () => {
    const before = await failedRun();
    const lock = join(repo.repo, '.svc', 'runs', before.run, 'take.lock');
    mkdirSync(lock);
    try {
      assert.match(await refusedResume(before),
        /cannot be taken: ".*take\.lock" is a folder, which svc never makes there; remove it/);
      await asItWas(before);
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  });

  it('keeps a failed run as it was when its launcher refuses the resume after reading the run folder', async () => {
    const before = await failedRun();
    // The folder says otherwise than the Control Plane's row (a worker's last ship not yet in): the launcher, which
    // goes by the folder, refuses the resume before it writes anything.
    const state = await leftState(before.run);
    writeFileSync(state.path, JSON.stringify({ ...JSON.parse(state.text), status: 'running', pid: null, proc_start: null }));
    try {
      assert.match(await refusedResume(before), /is running; only stopped or failed runs can be resumed/);
      await asItWas(before);
    } finally {
      writeFileSync(state.path, state.text);
    }
  });

  it('keeps a failed run as it was when the "providers" setting changed its provider since, naming a retry',
    async () => {
      // The setting is the operator's (DESIGN §7a): a plan that ran its entry never outlives a change of it.
      const setting = (command: string[]) =>
        control.request('PUT', '/v1/config', { body: { providers: { cp: { command } } } });
      const flaky = join(repo.bin, 'flaky.sh');
      assert.equal((await setting([flaky])).status, 200);
      try {
        const { source, run } = (await control.request('POST', '/v1/start', {
          body: { brief: 'cp', repo: repo.repo, provider: 'cp', pr: false },
        })).json;
        const before = await settled(source, run, 'failed');
        await leftState(run);
        assert.equal((await setting([flaky, '--other'])).status, 200);
        assert.match(await refusedResume(before), /runs the operator's provider "cp" as its entry was .*retry it/);
        await asItWas(before);
      } finally {
        await control.request('PUT', '/v1/config', { body: { providers: {} } });
      }
    });

  it('lets a resume made by hand, shipped after the refused one was put back, say the run is running', async () => {
    const before = await failedRun();
    // `svc start --resume` by hand took the run first: its worker wrote it running, and ships that only later.
    const state = await leftState(before.run);
    const byHand = new Date().toISOString();
    writeFileSync(state.path, JSON.stringify({ ...JSON.parse(state.text), status: 'running', updated_at: byHand }));
    try {
      assert.match(await refusedResume(before), /is running; only stopped or failed runs can be resumed/);
      await asItWas(before);
      const shipped = await control.request('POST', '/v1/ingest', { body: resumedByHand(before, byHand) });
      assert.equal(shipped.status, 200, shipped.text);
      assert.equal((await runOf(before.source, before.run)).status, 'running', 'its runner\'s word, not the put-back');
    } finally {
      writeFileSync(state.path, state.text);
      control.deps.stores.runs.setStatus(before.source, before.run, 'failed', Date.now());
    }
  });

  it('leaves a run running when a resume made by hand shipped while the refused one waited', { timeout: 60_000 },
    async () => {
      const before = await failedRun();
      // A live process holds the run (as `svc ship` records itself): the Control Plane's launcher waits for it.
      const shipper = await idleNode();
      const hold = join(repo.repo, '.svc', 'runs', before.run, SHIP_HOLD);
      try {
        writeFileSync(hold, JSON.stringify({ pid: shipper.pid, proc_start: procStart(shipper.pid!) }));
        const refusal = refusedResume(before);
        await waitFor(async () => (await runOf(before.source, before.run)).status === 'running' || null, 'the resume');
        // Meanwhile a resume made by hand (it took the run once the shipper left, say) ships its move out of the failure.
        const shipped = await control.request('POST', '/v1/ingest', {
          body: resumedByHand(before, new Date().toISOString()),
        });
        assert.equal(shipped.status, 200, shipped.text);
        assert.match(await refusal, /svc ship \(pid \d+\) is still sending it/);
        assert.equal((await runOf(before.source, before.run)).status, 'running', 'not put back over its runner\'s word');
      } finally {
        shipper.kill('SIGKILL');
        await once(shipper, 'exit');
        rmSync(hold, { force: true });
        control.deps.stores.runs.setStatus(before.source, before.run, 'failed', Date.now());
      }
    });

  it('keeps a stopped run stopped when its resume is refused because another run works in its checkout', async () => {
    const startSleepy = async () => {
      const body = { brief: 'sleep', repo: repo.repo, provider: 'sleepy' };
      const res = await control.request('POST', '/v1/start', { body });
      assert.equal(res.status, 202, res.text);
      const up = join(control.home, AGENT_STATE, `${res.json.run}.up`);
      await waitFor(() => existsSync(up) || null, 'the provider to start');
      return res.json as { source: string; run: string };
    };
    const stopped = await startSleepy();
    const path = `/v1/runs/${stopped.source}/${stopped.run}`;
    assert.equal((await control.request('POST', `${path}/stop`, { body: {} })).status, 202);
    // Once named: the worker ships the signal it got, then the Control Plane names itself.
    const before = await waitFor(async () => {
      const r = await runOf(stopped.source, stopped.run);
      return r.failure?.reason === 'stopped by the Control Plane (a stop request)' ? r : null;
    }, 'the stop to be named');
    const working = await startSleepy();
    try {
      const resumePath = `/v1/runs/${stopped.source}/${stopped.run}/resume`;
      const resumed = await control.request('POST', resumePath, { body: {} });
      assert.equal(resumed.status, 202, resumed.text);
      type Event = { kind: string; data: { message?: string } };
      const events = async () => (await control.request('GET', `${path}/events?limit=500`)).json.items as Event[];
      const refusal = await waitFor(async () => (await events()).find((e) => e.kind === 'error')?.data.message ?? null,
        'the refusal');
      const busy = `Run ${working.run} is already working in this checkout.*wait for run ${working.run} to end, then resume`;
      assert.match(refusal, new RegExp(busy));
      const after = await runOf(stopped.source, stopped.run);
      assert.equal(after.status, 'stopped');
      assert.deepEqual(after.failure, before.failure, 'its stop, not a failed launch');
      assert.equal(after.ended_at, before.ended_at);
      const state = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', stopped.run, 'state.json'), 'utf8'));
      assert.equal(state.status, 'stopped');
    } finally {
      await control.request('POST', `/v1/runs/${working.source}/${working.run}/stop`, { body: {} });
      await settled(working.source, working.run, 'stopped');
    }
  });

  it('answers the same run for a repeated request_id and 409s when the body differs', async () => {
    const body = { brief: 'idempotent', repo: repo.repo, provider: 'fake', request_id: 'req-1' };
    const a = await control.request('POST', '/v1/start', { body });
    const b = await control.request('POST', '/v1/start', { body });
    assert.equal(a.status, 202);
    assert.equal(b.status, 200);
    assert.equal(b.json.run, a.json.run);
    const c = await control.request('POST', '/v1/start', { body: { ...body, brief: 'other' } });
    assert.equal(c.status, 409);
    assert.equal(c.json.error.code, 'conflict');
    await settled(a.json.source, a.json.run, 'succeeded');
  });

  it('starts a new run for a request_id whose run was deleted', async () => {
    const body = { brief: 'deleted then again', repo: repo.repo, provider: 'fake', request_id: 'req-deleted' };
    const first = await control.request('POST', '/v1/start', { body });
    assert.equal(first.status, 202);
    await settled(first.json.source, first.json.run, 'succeeded');
    const del = await control.request('DELETE', `/v1/runs/${first.json.source}/${first.json.run}`);
    assert.equal(del.status, 200, del.text);
    assert.equal(control.deps.stores.startRequests.get('req-deleted'), undefined);
    const again = await control.request('POST', '/v1/start', { body });
    assert.equal(again.status, 202, again.text);
    assert.notEqual(again.json.run, first.json.run);
    const repeat = await control.request('POST', '/v1/start', { body });
    assert.equal(repeat.status, 200);
    assert.equal(repeat.json.run, again.json.run);
    await settled(again.json.source, again.json.run, 'succeeded');
  });

  it('treats a stored request_id whose run no longer exists as a new request', async () => {
    const body = { brief: 'orphaned id', repo: repo.repo, provider: 'fake', request_id: 'req-orphan' };
    control.deps.stores.startRequests.add({ request_id: 'req-orphan', body_sha256: 'x'.repeat(64), source: 'local', run: 'rgone', created_at: Date.now() });
    const res = await control.request('POST', '/v1/start', { body });
    assert.equal(res.status, 202, res.text);
    assert.equal(control.deps.stores.startRequests.get('req-orphan')?.run, res.json.run);
    await settled(res.json.source, res.json.run, 'succeeded');
  });

  it('rejects a start body with unknown fields, two inputs, or a repo that is not a git repository', async () => {
    const cases = [
      { brief: 'x', repo: repo.repo, extra: 1 },
      { brief: 'x', issue_url: 'https://acme.sentry.io/issues/1/', repo: repo.repo },
      { brief: 'x', repo: repo.home },
      { brief: 'x', repo: 'relative/path' },
    ];
    for (const body of cases) {
      const res = await control.request('POST', '/v1/start', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json.error.code, 'invalid_param');
    }
  });

  it('names a start body without a repo as missing the field, not as a relative path', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'x' } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
    assert.equal(res.json.error.message, '"repo" is required: the absolute path of a registered project');
  });

  it('rejects a spec_path that is not an existing .md or .json, a bad issue_url, pr or request_id, naming the field', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ spec_path: 'missing.md' }, /"spec_path" must name an existing/],
      [{ spec_path: 'a.txt' }, /"spec_path" must name an existing/],
      [{ issue_url: 'https://acme.sentry.io/projects/1/' }, /"issue_url" must be an error-tracker issue URL/],
      [{ brief: 'x', pr: 'yes' }, /"pr" must be true or false/],
      [{ brief: 'x', request_id: 'no spaces allowed' }, /"request_id" must be 1-128 letters/],
    ];
    for (const [fields, message] of cases) {
      const res = await control.request('POST', '/v1/start', { body: { ...fields, repo: repo.repo } });
      assert.equal(res.status, 400, JSON.stringify(fields));
      assert.equal(res.json.error.code, 'invalid_param');
      assert.match(res.json.error.message, message);
    }
  });

  it('refuses a spec_path outside the repository (../, absolute, a link out of it) with the same 400', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'svc-secret-'));
    const link = join(repo.repo, 'TASK.md');
    const runs = control.deps.stores.runs.list({ limit: 500 }).length;
    try {
      writeFileSync(join(outside, 'credentials.json'), '{"private_key":"SECRET"}');
      writeFileSync(join(outside, 'id_ed25519.md'), 'SECRET');
      symlinkSync(join(outside, 'id_ed25519.md'), link);
      const relative = join(relativePath(repo.repo, outside), 'credentials.json');
      for (const spec_path of [relative, join(outside, 'credentials.json'), 'TASK.md', '.']) {
        const res = await control.request('POST', '/v1/start', { body: { spec_path, repo: repo.repo } });
        assert.equal(res.status, 400, spec_path);
        assert.equal(res.json.error.message, '"spec_path" must name an existing .md spec or .json export');
      }
      assert.equal(control.deps.stores.runs.list({ limit: 500 }).length, runs);
    } finally {
      rmSync(link, { force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('starts a run from a spec inside the repository, named through a link inside it too', async () => {
    mkdirSync(join(repo.repo, 'specs'), { recursive: true });
    writeFileSync(join(repo.repo, 'specs', 'fix.md'), '# Fix\n\nappend fixed to a.txt\n');
    symlinkSync(join('specs', 'fix.md'), join(repo.repo, 'FIX.md'));
    try {
      const body = { spec_path: 'FIX.md', repo: repo.repo, provider: 'fake' };
      const res = await control.request('POST', '/v1/start', { body });
      assert.equal(res.status, 202, res.text);
      await settled(res.json.source, res.json.run, 'succeeded');
    } finally {
      rmSync(join(repo.repo, 'FIX.md'), { force: true });
      rmSync(join(repo.repo, 'specs'), { recursive: true, force: true });
    }
  });

  it('refuses to start a run in a registered folder that is not a git repository', async () => {
    const plain = mkdtempSync(join(tmpdir(), 'svc-plain-'));
    try {
      assert.equal((await control.request('PUT', '/v1/config', { body: { repos: [plain] } })).status, 200);
      const res = await control.request('POST', '/v1/start', { body: { brief: 'x', repo: plain } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.message, '"repo" is not a git repository');
    } finally {
      await control.request('PUT', '/v1/config', { body: { repos: null } });
      rmSync(plain, { recursive: true, force: true });
    }
  });

  it('refuses to start a run in a repository nobody registered, and starts one once the "repos" setting names it', async () => {
    const other = makeRepo({ policy: POLICY, providers: { fake: EDIT_SCRIPT } });
    try {
      const link = join(other.root, 'link-to-other');
      symlinkSync(other.repo, link);
      const refused = await control.request('POST', '/v1/start', { body: { brief: 'planted', repo: other.repo, provider: 'fake' } });
      assert.equal(refused.status, 400);
      assert.equal(refused.json.error.code, 'invalid_param');
      assert.ok(refused.json.error.message.includes(other.repo), refused.json.error.message);
      assert.match(refused.json.error.message, /import it/);
      assert.equal(control.deps.stores.runs.list({ limit: 500 }).some((r) => r.brief === 'planted'), false);
      // The setting is compared by real path: naming a link to it registers it.
      assert.equal((await control.request('PUT', '/v1/config', { body: { repos: [link] } })).status, 200);
      // A repository nested inside a registered one is not registered itself (an agent could have planted it).
      const nested = join(other.repo, 'nested');
      mkdirSync(nested);
      execFileSync('git', ['init', '-q'], { cwd: nested });
      const viaNested = await control.request('POST', '/v1/start', { body: { brief: 'planted', repo: nested, provider: 'fake' } });
      assert.equal(viaNested.status, 400, viaNested.text);
      assert.match(viaNested.json.error.message, /not registered/);
      rmSync(nested, { recursive: true });
      const allowed = await control.request('POST', '/v1/start', { body: { brief: 'allowed', repo: other.repo, provider: 'fake' } });
      assert.equal(allowed.status, 202, allowed.text);
      await settled(allowed.json.source, allowed.json.run, 'succeeded');
      const projects = (await control.request('GET', '/v1/projects')).json.items;
      assert.deepEqual(projects.map((p: { via: string }) => p.via), ['import', 'repos']);
      // Taken out of the setting again, its runs can no longer be retried, and run detail says why.
      await control.request('PUT', '/v1/config', { body: { repos: null } });
      const retry = await control.request('POST', `/v1/runs/${allowed.json.source}/${allowed.json.run}/retry`, { body: {} });
      assert.equal(retry.status, 409);
      assert.match(retry.json.error.message, /no longer registered/);
      assert.equal((await runOf(allowed.json.source, allowed.json.run)).refusals.retry, retry.json.error.message);
    } finally {
      await control.request('PUT', '/v1/config', { body: { repos: null } });
      other.cleanup();
    }
  });

  it('answers a run of its own source whose folder it does not know by its next ingest only, never also a file', async () => {
    const source = control.deps.settings.source;
    control.deps.stores.runs.upsert(source, { run: 'rcli1', status: 'blocked', started_at: Date.now(), question: 'q?' });
    assert.equal((await control.request('POST', `/v1/runs/${source}/rcli1/answer`, { body: { answer: 'yes' } })).status, 202);
    const pending = control.deps.stores.controlRequests.pending(source).filter((p) => p.run === 'rcli1');
    assert.deepEqual(pending.map((p) => [p.action, p.payload]), [['answer', { answer: 'yes', by: 'control:local' }]]);
    assert.equal(existsSync(join(control.deps.settings.answerDir, source, 'rcli1.json')), false);
  });

  it('records who answered in the audit and the answer itself: the caller, or the origin the trigger relays', async () => {
    const source = control.deps.settings.source;
    control.deps.stores.runs.upsert(source, { run: 'rwho1', status: 'blocked', started_at: Date.now(), question: 'q?' });
    const url = `/v1/runs/${source}/rwho1/answer`;
    const audit = async () => (await control.request('GET', '/v1/audit?limit=1')).json.items[0];
    // A control character would forge a second line wherever the name is shown: refused, nothing recorded.
    const forged = await control.request('POST', url, { body: { answer: 'raise to $100', origin: 'x\nby: cli' } });
    assert.equal(forged.status, 400);
    assert.deepEqual(control.deps.stores.controlRequests.pending(source).filter((p) => p.run === 'rwho1'), []);
    assert.equal((await control.request('POST', url, { body: { answer: 'raise to $100', origin: 'webhook:mallory' } }))
      .status, 202);
    const relayed = await audit();
    assert.deepEqual([relayed.action, relayed.actor, relayed.detail.answered_by],
      ['run.answer', 'local', 'origin:webhook:mallory']);
    assert.equal((await control.request('POST', url, { body: { answer: '$1' } })).status, 202);
    assert.equal((await audit()).detail.answered_by, 'control:local');
    assert.ok(!JSON.stringify(await audit()).includes('$1'), 'the audit names who, never the answer');
    const pending = control.deps.stores.controlRequests.pending(source).filter((p) => p.run === 'rwho1');
    assert.deepEqual(pending.map((p) => p.payload), [
      { answer: 'raise to $100', by: 'origin:webhook:mallory' }, { answer: '$1', by: 'control:local' },
    ]);
    const event = control.deps.stores.events.latest(source, 'rwho1', 'answer')!;
    assert.deepEqual(JSON.parse(event.data), { answer: '$1', via: 'control', by: 'control:local' });
  });

  it('records a control request for a run of another source instead of signalling it', async () => {
    control.deps.stores.runs.upsert('far', { run: 'r1', status: 'blocked', started_at: Date.now(), question: 'q?' });
    const res = await control.request('POST', '/v1/runs/far/r1/answer', { body: { answer: 'yes' } });
    assert.equal(res.status, 202);
    const stop = await control.request('POST', '/v1/runs/far/r1/stop', { body: {} });
    assert.equal(stop.status, 202);
    const pending = control.deps.stores.controlRequests.pending('far');
    assert.deepEqual(pending.map((p) => p.action), ['answer', 'stop']);
    assert.deepEqual(pending[0]!.payload, { answer: 'yes', by: 'control:local' });
    const resume = await control.request('POST', '/v1/runs/far/r1/resume', { body: {} });
    assert.equal(resume.status, 409);
  });
});

describe('a launcher that exits 2 without saying why', () => {
  let control: TestControl;
  let repo: TestRepo;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    // The launcher inherits it and refuses it (exit 2) before its start command runs: no `{"failure"}` line.
    control = await startTestControl({ env: { SVC_COMPILE_CACHE: 'bogus', ...GIT_ENV }, projects: [repo.repo] });
  });
  after(async () => {
    await control.close();
    repo.cleanup();
  });

  it('fails the run as config, not retryable: exit 2 is a bad input or setting, the person\'s to fix', async () => {
    const res = await control.request('POST', '/v1/start', { body: { brief: 'x', repo: repo.repo, provider: 'fake' } });
    assert.equal(res.status, 202, res.text);
    const { source, run } = res.json;
    const failed = await waitFor(async () => {
      const r = (await control.request('GET', `/v1/runs/${source}/${run}`)).json;
      return r?.status === 'failed' ? r : null;
    }, 'the run to fail');
    assert.equal(failed.failure.class, 'config', JSON.stringify(failed));
    assert.equal(failed.failure.retryable, false);
    assert.match(failed.failure.reason, /SVC_COMPILE_CACHE/);
  });
});
