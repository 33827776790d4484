// A model call cut before its final usage (the API's overloaded error mid-stream, the API closing the connection, the
// client going away) counts what the gate read of it and bounds for the rest, towards the run's budget and the day's:
// never $0, and never a refusal of every later call. On `svc gate serve`'s meter, with a loopback model stand-in.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { sharedMeter } from '../../src/gate/main.ts';
import { INPUT_BOUND } from '../../src/gate/usage.ts';
import { arrivingRecord, type EgressRecord } from '../../src/gate/evidence.ts';
import { createLogger } from '../../src/log.ts';
import { gateRequest, recordingConnect, tableResolver } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const SECRET = Buffer.from('cut-stream-budget-secret-0123456789abcdef');
const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
const MESSAGE_START = event('message_start', { type: 'message_start', message: { model: 'claude-haiku-4-5', usage: {
  input_tokens: 10_000, output_tokens: 1, cache_read_input_tokens: 2_000, cache_creation_input_tokens: 0 } } });
const FINAL = event('message_delta', { type: 'message_delta', usage: { output_tokens: 900 } });
const OVERLOADED = event('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
// What the agent's CLI sends: the model and its output maximum, which bounds what a cut call wrote.
const ASK = JSON.stringify({
  model: 'claude-haiku-4-5', max_tokens: 1_000, messages: [{ role: 'user', content: 'hi' }],
});
// The known part of a cut call at claude-haiku-4-5's row: 10,000 input, 2,000 cache reads, and the 1,000 output tokens
// the request allowed: $0.0152.
const CUT_USD = (10_000 * 1 + 2_000 * 0.1 + 1_000 * 5) / 1e6;

/** One call through the gate; resolves when the client's side closes, however it ends (a cut stream ends no body). */
function modelCall(port: number, credential: string, path: string, abortAfterFirstChunk = false, ask = ASK):
Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    let status = 0;
    let body = '';
    const req = request({
      host: '127.0.0.1', port, method: 'POST', path: `/_job/${credential}/_model/anthropic/v1/${path}/messages`, agent: false,
      headers: { 'content-type': 'application/json' },
    });
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
        if (abortAfterFirstChunk) req.destroy();
      });
      res.on('error', () => {});
      res.on('close', () => resolve({ status, body }));
    });
    req.on('error', () => resolve({ status, body }));
    req.end(ask);
  });
}

/** The model API stand-in, its Messages API at `/v1/<how>/messages`: `cut`: message_start, then the connection
 * closes; `overloaded`: message_start, then the API's error event and a clean end; `held-open`: message_start, then
 * nothing until the client goes; `silent`: no answer at all (`silent` counts the requests it read whole); `whole`:
 * message_start, then the final usage. */
const silent = { read: 0 };
async function startModel(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/silent/messages') return void (silent.read += 1);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(MESSAGE_START);
      if (req.url === '/v1/cut/messages') setImmediate(() => res.socket?.destroy());
      else if (req.url === '/v1/overloaded/messages') res.end(OVERLOADED);
      else if (req.url === '/v1/whole/messages') res.end(FINAL);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

/** A shared gate (`svc gate serve`'s meter with `env`) in front of the stand-in at `port`, its records in `log`. */
function startSharedGate(env: NodeJS.ProcessEnv, port: number, log: EgressRecord[]): Promise<Gate> {
  const policy = parseGatePolicy({ allow: [`127.0.0.1:${port}`] });
  const { meter, count } = sharedMeter(env);
  return startGate({
    policy, tcpPort: 0, connect: recordingConnect().connect, resolve: tableResolver({}).resolve,
    clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
    models: [modelRoute('anthropic', `http://127.0.0.1:${port}`, 'x-api-key', 'k')],
    meter, onRecord: (record) => {
      count(record);
      log.push(record);
    },
  });
}

const mint = (job: string, repo: string, maxUsd?: number) =>
  mintJobCredential(SECRET, { job, run: `r-${job}`, repo, maxUsd }, Date.now() + 3600_000);
const near = (a: number, b: number): void => assert.ok(Math.abs(a - b) < 1e-12, `${a} ≈ ${b}`);

describe('a budgeted run after a model call cut before its final usage', () => {
  let gate: Gate;
  let model: Server;
  const egressLog: EgressRecord[] = [];

  before(async () => {
    const stand = await startModel();
    model = stand.server;
    gate = await startSharedGate({ SVC_BUDGET_REPO_DAY_USD: '0.05' }, stand.port, egressLog);
  });

  after(async () => {
    await gate.close();
    model.closeAllConnections();
    model.close();
  });

  const call = (credential: string, path: string, abort = false) => modelCall(gate.port ?? 0, credential, path, abort);
  const metered = (job: string, n: number) =>
    waitFor(() => egressLog.filter((r) => r.run === `r-${job}` && r.metered).length >= n, `${n} metered calls`);
  const spent = (job: string): number =>
    egressLog.filter((r) => r.run === `r-${job}`).reduce((sum, r) => sum + (r.metered?.usd ?? 0), 0);

  it('counts what message_start said and the request\'s max_tokens, and lets the run call again under its budget',
    async () => {
      const credential = mint('cut', 'acme/cut', 0.05);
      for (const [i, path] of ['cut', 'overloaded'].entries()) {
        const answered = await call(credential, path);
        assert.equal(answered.status, 200);
        assert.ok(answered.body.startsWith(MESSAGE_START), 'the stream reached the client as far as it went');
        await metered('cut', i + 1);
      }
      const [cut, overloaded] = egressLog.filter((r) => r.run === 'r-cut').map((r) => r.metered);
      for (const m of [cut, overloaded]) {
        assert.deepEqual({ ...m, usd: null }, { model: 'claude-haiku-4-5', tokens_in: 10_000, tokens_out: 1_000,
          cache_read: 2_000, cache_write: 0, usd: null, unknown: 'the response ended before its final usage' });
        near(m?.usd ?? 0, CUT_USD);
      }
      near(spent('cut'), 2 * CUT_USD);
      const third = await call(credential, 'overloaded');
      assert.equal(third.status, 200, 'under its budget ($0.0304 of $0.05): the next call goes through');
      await metered('cut', 3);
      const fourth = await call(credential, 'cut');
      assert.equal(fourth.status, 200, '$0.0456 of $0.05: still under');
      await metered('cut', 4);
      const refused = await call(credential, 'cut');
      assert.equal(refused.status, 429);
      assert.equal(refused.body, 'svc gate: the run\'s budget of $0.05 is reached (metered $0.06): the run stops ' +
        'here (a pod\'s budget is not raised)\n');
      const answer = await gateRequest({ port: gate.port ?? 0 }, `/_job/${credential}/_egress`);
      const egress = JSON.parse(answer.body) as { metered: { cost_usd: number; unpriced: number; unknown: number;
        calls: number; }; };
      near(egress.metered.cost_usd, 4 * CUT_USD);
      assert.deepEqual([egress.metered.calls, egress.metered.unknown, egress.metered.unpriced], [4, 4, 0]);
    });

  it('counts a call the client walked away from, towards its repository\'s day cap', async () => {
    const credential = mint('walked-away', 'acme/day');
    for (let i = 1; i <= 4; i++) {
      const answered = await call(credential, 'held-open', true);
      assert.equal(answered.status, 200, `call ${i} passes under the day's cap`);
      await metered('walked-away', i);
    }
    near(spent('walked-away'), 4 * CUT_USD);
    const refused = await call(mint('same-repo', 'acme/day'), 'cut');
    assert.equal(refused.status, 429, 'the day\'s $0.06 of $0.05 holds every run of the repository');
    // No amount: the day's $0.06 is another run's spending (the refusal is this run's evidence, its PR's receipt).
    assert.equal(refused.body, 'svc gate: the daily budget of $0.05 for acme/day is reached: model calls are refused ' +
      'until the operator raises it\n');
    assert.equal((await call(mint('other-repo', 'acme/other'), 'overloaded')).status, 200, 'another repository\'s not');
  });

  it('counts a call the client gave up on before its answer came at its bounds, since the API may have run it',
    async () => {
    const credential = mint('unanswered', 'acme/unanswered');
    const read = silent.read;
    const req = request({
      host: '127.0.0.1', port: gate.port ?? 0, method: 'POST', agent: false,
      path: `/_job/${credential}/_model/anthropic/v1/silent/messages`, headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => {});
    req.end(ASK);
    await waitFor(() => silent.read > read, 'the API read the request');
    req.destroy();
    await metered('unanswered', 1);
    const m = egressLog.find((r) => r.run === 'r-unanswered')?.metered;
    const bytes = Buffer.byteLength(ASK);
    assert.deepEqual({ ...m, usd: null }, { model: 'claude-haiku-4-5', tokens_in: bytes, tokens_out: 1_000,
      cache_read: 0, cache_write: 0, usd: null, unknown: 'the call ended before its answer came' });
    near(m?.usd ?? 0, (bytes * 1 + 1_000 * 5) / 1e6);
  });

  it('counts the input of an unanswered call at its bytes only up to the largest context window (INPUT_BOUND)',
    async () => {
    const credential = mint('unanswered-large', 'acme/unanswered');
    const large = JSON.stringify({ model: 'claude-haiku-4-5', max_tokens: 1_000,
      messages: [{ role: 'user', content: 'x'.repeat(INPUT_BOUND + 500_000) }] });
    const read = silent.read;
    const req = request({
      host: '127.0.0.1', port: gate.port ?? 0, method: 'POST', agent: false,
      path: `/_job/${credential}/_model/anthropic/v1/silent/messages`, headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => {});
    req.end(large);
    await waitFor(() => silent.read > read, 'the API read the request');
    req.destroy();
    await metered('unanswered-large', 1);
    const m = egressLog.find((r) => r.run === 'r-unanswered-large')?.metered;
    assert.deepEqual([m?.tokens_in, m?.tokens_out, m?.doubt], [INPUT_BOUND, 1_000, undefined]);
    near(m?.usd ?? 0, (INPUT_BOUND * 1 + 1_000 * 5) / 1e6);
  });
});

describe('svc gate serve restarted with SVC_GATE_STATE_DIR', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-gate-state-'));
  const env = { SVC_GATE_STATE_DIR: dir, SVC_BUDGET_SERVER_DAY_USD: '0.05' };
  let model: Server;
  let port = 0;
  const gates: Gate[] = [];
  const egressLog: EgressRecord[] = [];

  before(async () => {
    ({ server: model, port } = await startModel());
  });

  after(async () => {
    for (const gate of gates) await gate.close();
    model.closeAllConnections();
    model.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const open = async (): Promise<Gate> => {
    const gate = await startSharedGate(env, port, egressLog);
    gates.push(gate);
    return gate;
  };
  const calls = (): number => egressLog.filter((r) => r.metered).length;

  it('keeps what the run and the day spent: neither gets its cap again', async () => {
    const first = await open();
    const run = mint('restarted', 'acme/web', 0.04);
    for (let i = 1; i <= 2; i++) {
      assert.equal((await modelCall(first.port ?? 0, run, 'overloaded')).status, 200);
      await waitFor(() => calls() >= i, `${i} metered calls`);
    }
    await first.close();
    const second = await open();
    assert.equal((await modelCall(second.port ?? 0, run, 'overloaded')).status, 200, '$0.0304 of $0.04 before it');
    await waitFor(() => calls() >= 3, '3 metered calls');
    const over = await modelCall(second.port ?? 0, run, 'overloaded');
    assert.equal(over.status, 429);
    assert.equal(over.body, 'svc gate: the run\'s budget of $0.04 is reached (metered $0.05): the run stops here ' +
      '(a pod\'s budget is not raised)\n');
    assert.equal((await modelCall(second.port ?? 0, mint('other', 'acme/other'), 'overloaded')).status, 200);
    await waitFor(() => calls() >= 4, '4 metered calls');
    const day = await modelCall(second.port ?? 0, mint('third', 'acme/third'), 'overloaded');
    assert.equal(day.status, 429);
    assert.equal(day.body, 'svc gate: this server\'s daily budget of $0.05 is reached: model calls are refused until ' +
      'the operator raises it\n');
  });

  it('goes on counting in memory, and logs each write it could not make, when the folder cannot be written', () => {
    const full = mkdtempSync(join(tmpdir(), 'svc-gate-state-full-'));
    try {
      writeFileSync(join(full, 'metered'), ''); // a file where the day ledger's folder goes
      const lines: string[] = [];
      const { meter, count } = sharedMeter({ SVC_GATE_STATE_DIR: full, SVC_BUDGET_REPO_DAY_USD: '0.05' },
        createLogger('gate', (line) => lines.push(line)));
      mkdirSync(join(full, 'run-spend.json')); // a folder where the runs' spending is renamed to
      const expiresAt = Date.now() + 3600_000;
      const budgeted = { policy: parseGatePolicy({}), span: null,
        who: { job: 'j1', run: 'r-j1', repo: 'acme/full', maxUsd: 0.05, expiresAt } };
      const other = { ...budgeted, who: { job: 'j2', run: 'r-j2', repo: 'acme/full', expiresAt } };
      assert.equal(meter.refusal(budgeted), null);
      const call = { model: 'claude-haiku-4-5', tokens_in: 0, tokens_out: 0, cache_read: 0, cache_write: 0, usd: 0.03,
        unknown: null };
      for (let i = 0; i < 2; i++) count({ ...arrivingRecord('model', budgeted), metered: call });
      assert.equal(meter.refusal(budgeted), 'the run\'s budget of $0.05 is reached (metered $0.06): the run stops ' +
        'here (a pod\'s budget is not raised)');
      assert.equal(meter.refusal(other),
        'the daily budget of $0.05 for acme/full is reached: model calls are refused until the operator raises it');
      assert.equal(lines.length, 4, lines.join(''));
      const logged = /cannot write the (runs' spending|day's spending) to SVC_GATE_STATE_DIR/;
      assert.ok(lines.every((line) => logged.test(line)), lines.join(''));
      assert.deepEqual(readdirSync(full).sort(), ['metered', 'run-spend.json'], 'no temporary file is left behind');
    } finally {
      rmSync(full, { recursive: true, force: true });
    }
  });

  it('keeps a run\'s doubted count across a restart: its next call is still refused', () => {
    const state = mkdtempSync(join(tmpdir(), 'svc-gate-state-doubt-'));
    try {
      const who = { job: 'j', run: 'r-doubt', repo: 'acme/web', maxUsd: 50, expiresAt: Date.now() + 3600_000 };
      const asker = { policy: parseGatePolicy({}), who, span: null };
      const first = sharedMeter({ SVC_GATE_STATE_DIR: state });
      assert.equal(first.meter.refusal(asker), null);
      first.count({ ...arrivingRecord('model', asker), metered: { model: null, tokens_in: 1, tokens_out: 1,
        cache_read: 0, cache_write: 0, usd: 0.01, unknown: 'the response ended before its final usage',
        doubt: 'its request was not read: a body past 32 MiB' } });
      const again = sharedMeter({ SVC_GATE_STATE_DIR: state }).meter.refusal(asker);
      assert.equal(again, 'the run\'s budget of $50.00 cannot be kept: a model call may have cost more than its ' +
        'bounds (its request was not read: a body past 32 MiB), so the gate cannot count what the run spent; the run ' +
        'stops here');
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  it('writes the runs\' spending only when a restart needs it: a budgeted run\'s cost, a run\'s first doubt', () => {
    const state = mkdtempSync(join(tmpdir(), 'svc-gate-state-writes-'));
    try {
      const file = join(state, 'run-spend.json');
      const { meter, count } = sharedMeter({ SVC_GATE_STATE_DIR: state, SVC_BUDGET_SERVER_DAY_USD: '100' });
      const expiresAt = Date.now() + 3600_000;
      const asker = (run: string, maxUsd?: number) =>
        ({ policy: parseGatePolicy({}), span: null, who: { job: run, run, repo: 'acme/web', maxUsd, expiresAt } });
      const call = (run: string, usd: number, doubt?: string) => {
        const record = arrivingRecord('model', asker(run));
        count({ ...record, metered: { model: 'claude-haiku-4-5', tokens_in: 1, tokens_out: 1, cache_read: 0,
          cache_write: 0, usd, unknown: null, ...(doubt ? { doubt } : {}) } });
      };
      const written = () => existsSync(file) ? Object.keys(JSON.parse(readFileSync(file, 'utf8')).runs).sort() : null;
      for (const run of ['r-capped', 'r-plain']) assert.equal(meter.refusal(asker(run)), null);
      assert.equal(meter.refusal(asker('r-budget', 5)), null);
      call('r-capped', 0.01);
      call('r-plain', 0.01);
      assert.equal(written(), null, 'a capped run\'s cost is the day ledger\'s: nothing to write');
      call('r-budget', 0.01);
      assert.deepEqual(written(), ['r-budget']);
      call('r-capped', 0.01, 'its request was not read: a body past 32 MiB');
      assert.deepEqual(written(), ['r-budget', 'r-capped']);
      rmSync(file);
      call('r-capped', 0.01, 'its request was not read: a body past 32 MiB');
      call('r-plain', 0.01);
      assert.equal(written(), null, 'a second doubt, or another capped call, changes nothing a restart needs');
      call('r-budget', 0.01);
      assert.deepEqual(written(), ['r-budget', 'r-capped']);
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  it('refuses to start on a state file it cannot read, naming it', () => {
    const bad = mkdtempSync(join(tmpdir(), 'svc-gate-state-bad-'));
    try {
      writeFileSync(join(bad, 'run-spend.json'), '{"runs": {"r-1": {"usd": "lots"}}}');
      assert.throws(() => sharedMeter({ SVC_GATE_STATE_DIR: bad }), (err: Error) => err.name === 'BadSettingError' &&
        err.message === `SVC_GATE_STATE_DIR: ${join(bad, 'run-spend.json')} holds no spending for run "r-1"; move it ` +
          'away to start with no run\'s spending');
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });
});

describe('a run whose call was counted at bounds its request could not set for certain', () => {
  let gate: Gate;
  let model: Server;
  const egressLog: EgressRecord[] = [];
  // The agent asks 128 answers behind an escaped key: the gate cannot tell, counts one answer, and doubts the count.
  const HIDDEN = '{"model":"claude-haiku-4-5","max_tokens":1000,"\\u006e":128,"messages":[]}';

  before(async () => {
    const stand = await startModel();
    model = stand.server;
    gate = await startSharedGate({ SVC_BUDGET_SERVER_DAY_USD: '1000' }, stand.port, egressLog);
  });

  after(async () => {
    await gate.close();
    model.closeAllConnections();
    model.close();
  });

  const call = (credential: string, path: string, ask = ASK) => modelCall(gate.port ?? 0, credential, path, false, ask);
  const metered = (job: string, n: number) =>
    waitFor(() => egressLog.filter((r) => r.run === `r-${job}` && r.metered).length >= n, `${n} metered calls`);
  const DOUBT = 'a model call may have cost more than its bounds (its request was not read: a key or value it cannot ' +
    'read for certain (an escaped key, a second generationConfig, a value past 16 KB, nesting past 64 levels)), so ' +
    'the gate cannot count what the run spent; the run stops here';

  it('lets the call through once, then refuses the run\'s next call under its budget, and says so in its cost',
    async () => {
      const credential = mint('doubted', 'acme/doubt', 50);
      assert.equal((await call(credential, 'cut', HIDDEN)).status, 200);
      await metered('doubted', 1);
      const m = egressLog.find((r) => r.run === 'r-doubted')?.metered;
      assert.equal(m?.doubt, 'its request was not read: a key or value it cannot read for certain (an escaped key, ' +
        'a second generationConfig, a value past 16 KB, nesting past 64 levels)');
      assert.ok((m?.usd ?? 0) < 50, 'one answer, well under the run\'s $50');
      const refused = await call(credential, 'overloaded');
      assert.equal(refused.status, 429);
      assert.equal(refused.body, `svc gate: the run's budget of $50.00 cannot be kept: ${DOUBT}\n`);
      const answer = await gateRequest({ port: gate.port ?? 0 }, `/_job/${credential}/_egress`);
      const egress = JSON.parse(answer.body) as { metered: { calls: number; unpriced: number; doubtful?: number } };
      assert.deepEqual([egress.metered.calls, egress.metered.unpriced, egress.metered.doubtful], [1, 0, 1]);
    });

  it('refuses the next call of a run without a budget of its own under a day cap, naming the cap', async () => {
    const credential = mint('capped', 'acme/capped');
    assert.equal((await call(credential, 'cut', HIDDEN)).status, 200);
    await metered('capped', 1);
    const refused = await call(credential, 'overloaded');
    assert.equal(refused.status, 429);
    assert.equal(refused.body, `svc gate: this server's daily budget of $1000.00 cannot be kept: ${DOUBT}\n`);
  });

  it('refuses the next call of a run under a day cap alone after a call of a model with no price', () => {
    // An unpriced call adds nothing to the day's count: ten of them would all pass a cap they each could fill.
    const { meter, count } = sharedMeter({ SVC_BUDGET_SERVER_DAY_USD: '0.5' });
    const who = { job: 'j', run: 'r-unpriced', repo: 'acme/unpriced', expiresAt: Date.now() + 3600_000 };
    const asker = { policy: parseGatePolicy({}), who, span: null };
    assert.equal(meter.refusal(asker), null);
    count({ ...arrivingRecord('model', asker), metered: { model: 'claude-unpriced-x', tokens_in: 0,
      tokens_out: 100_000, cache_read: 0, cache_write: 0, usd: null, unknown: null } });
    assert.equal(meter.refusal(asker), 'this server\'s daily budget of $0.50 cannot be kept: model ' +
      '"claude-unpriced-x" has no price, so the gate cannot count what the run spent; the run stops here');
  });

  it('holds a run under a day cap alone to six model calls under way (a budgeted run: two)', async () => {
    const credential = mint('capped-flight', 'acme/flight');
    const read = silent.read;
    const under = Array.from({ length: 6 }, () => {
      const req = request({ host: '127.0.0.1', port: gate.port ?? 0, method: 'POST', agent: false,
        path: `/_job/${credential}/_model/anthropic/v1/silent/messages` });
      req.on('error', () => {});
      req.end(ASK);
      return req;
    });
    await waitFor(() => silent.read === read + 6, 'six calls under way');
    const seventh = await call(credential, 'overloaded');
    assert.equal(seventh.status, 429);
    assert.equal(seventh.body, 'svc gate: this run has 6 model calls under way (its bound under the daily cap)\n');
    for (const req of under) req.destroy();
    await metered('capped-flight', 6);
    assert.equal((await call(credential, 'overloaded')).status, 200, 'once they ended, the next goes through');
  });

  it('leaves a clean cut call to call again; a request not read stays in doubt though its answer said its usage',
    async () => {
    const clean = mint('clean', 'acme/clean', 50);
    assert.equal((await call(clean, 'cut')).status, 200);
    await metered('clean', 1);
    assert.equal(egressLog.find((r) => r.run === 'r-clean')?.metered?.doubt, undefined);
    assert.equal((await call(clean, 'overloaded')).status, 200);
    const whole = mint('whole', 'acme/whole', 50);
    assert.equal((await call(whole, 'whole', HIDDEN)).status, 200);
    await metered('whole', 1);
    const m = egressLog.find((r) => r.run === 'r-whole')?.metered;
    // The API counted every answer, but what else the request asked unseen (the priority tier) is not known.
    assert.deepEqual([m?.tokens_out, m?.unknown], [900, null], 'the API counted every answer');
    assert.match(m?.doubt ?? '', /^its request was not read: /);
    assert.equal((await call(whole, 'overloaded')).status, 429);
  });
});
