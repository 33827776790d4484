// A call the gate could not count (its model has no price, its usage unknown) counts $0 towards nothing, so once a run
// has one, its next model call is refused wherever a budget applies to it: its own max_usd, its repository's day cap,
// the server's; and a run under a day's cap has at most 2 model calls under way, as one under max_usd. On
// `svc gate serve`'s meter (a real gate, loopback model stand-in) and on a run's own gate's (runMeter).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { sharedMeter } from '../../src/gate/main.ts';
import { runMeter } from '../../src/engine/egress.ts';
import type { Asker } from '../../src/gate/context.ts';
import type { EgressRecord, MeteredCall } from '../../src/gate/evidence.ts';
import type { RunState } from '../../src/engine/run-state.ts';
import { gateRequest, recordingConnect, tableResolver } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const SECRET = Buffer.from('uncounted-budgets-secret-0123456789abcdef');
const UNPRICED: MeteredCall = {
  model: 'gpt-5-pro', tokens_in: 0, tokens_out: 1_000_000, cache_read: 0, cache_write: 0, usd: null, unknown: null,
};
const PRICED: MeteredCall = { ...UNPRICED, model: 'gpt-5', usd: 0.01 };

describe("svc gate serve's day caps and calls it could not count", () => {
  let gate: Gate;
  let model: Server;
  const egressLog: EgressRecord[] = [];
  /** Answers of `/v1/held` calls, which the model stand-in keeps under way until the test sends them. */
  const held: Array<() => void> = [];

  before(async () => {
    // 1,000 output tokens of claude-sonnet-4-5 ($0.015); `/v1/unpriced` a model svc has no price for, `/v1/no-usage`
    // an answer without usage.
    model = createServer((req, res) => {
      req.resume();
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const name = req.url === '/v1/unpriced' ? 'claude-sonnet-4-5-pro' : 'claude-sonnet-4-5';
        const usage = req.url === '/v1/no-usage' ? {} : { usage: { input_tokens: 0, output_tokens: 1_000 } };
        res.end(JSON.stringify({ model: name, ...usage }));
      };
      if (req.url === '/v1/held') held.push(answer);
      else answer();
    });
    await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
    const port = (model.address() as AddressInfo).port;
    const policy = parseGatePolicy({ allow: [`127.0.0.1:${port}`] });
    const { meter, count } = sharedMeter({ SVC_BUDGET_REPO_DAY_USD: '50' });
    gate = await startGate({
      policy, tcpPort: 0, connect: recordingConnect().connect, resolve: tableResolver({}).resolve,
      clients: { secret: SECRET, maxPerClient: 8, policyFor: () => policy },
      models: [modelRoute('anthropic', `http://127.0.0.1:${port}`, 'x-api-key', 'k')],
      meter, onRecord: (record) => {
        count(record);
        egressLog.push(record);
      },
    });
  });

  after(async () => {
    await gate.close();
    model.closeAllConnections();
    model.close();
  });

  // Jobs without max_usd in their credential: only the repository's day cap applies to them.
  const mint = (job: string, repo = 'acme/web') =>
    mintJobCredential(SECRET, { job, run: `r-${job}`, repo }, Date.now() + 3600_000);
  const modelCall = (credential: string, path = 'messages') =>
    gateRequest({ port: gate.port ?? 0 }, `/_job/${credential}/_model/anthropic/v1/${path}`,
      { method: 'POST', body: '{}' });
  const metered = (job: string, n: number) =>
    waitFor(() => egressLog.filter((r) => r.run === `r-${job}` && r.metered).length >= n, `${n} metered calls`);

  it("refuses a run's next model call at its repository's day cap once one had no price", async () => {
    const credential = mint('unpriced');
    assert.equal((await modelCall(credential, 'unpriced')).status, 200, 'the gate knows only at its end');
    await metered('unpriced', 1);
    const refused = await modelCall(credential);
    assert.equal(refused.status, 429);
    assert.equal(refused.body, 'svc gate: the daily budget of $50.00 for acme/web cannot be kept: model ' +
      '"claude-sonnet-4-5-pro" has no price, so the gate cannot count what the run spent; the run stops here\n');
    assert.equal((await modelCall(mint('priced'))).status, 200, "another run of the repository is not refused");
  });

  it("refuses a run's next model call at its repository's day cap once one's usage was unknown", async () => {
    const credential = mint('no-usage');
    assert.equal((await modelCall(credential, 'no-usage')).status, 200);
    await metered('no-usage', 1);
    const refused = await modelCall(credential);
    assert.equal(refused.status, 429);
    assert.equal(refused.body, 'svc gate: the daily budget of $50.00 for acme/web cannot be kept: a model call\'s ' +
      'usage was unknown (the response carried no usage), so the gate cannot count what the run spent; ' +
      'the run stops here\n');
  });

  it('lets a run under a day cap have two model calls under way; a third is refused 429 with Retry-After', async () => {
    const credential = mint('in-flight');
    const first = modelCall(credential, 'held');
    const second = modelCall(credential, 'held');
    await waitFor(() => held.length === 2, 'two calls under way');
    const third = await modelCall(credential);
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '1');
    assert.equal(third.body, 'svc gate: this run has 2 model calls under way (its budget\'s bound)\n');
    for (const answer of held.splice(0)) answer();
    assert.deepEqual([(await first).status, (await second).status], [200, 200]);
    await metered('in-flight', 2);
    assert.equal((await modelCall(credential)).status, 200, 'once they ended, the next goes through');
  });
});

describe("svc gate serve's meter without a day cap, and with the server's", () => {
  const asker = (run: string, maxUsd?: number): Asker => ({
    policy: parseGatePolicy({}), span: null,
    who: { job: run, run, repo: 'acme/web', expiresAt: Date.now() + 3600_000, ...(maxUsd ? { maxUsd } : {}) },
  });
  const record = (run: string, metered: MeteredCall) => ({ run, repo: 'acme/web', metered }) as EgressRecord;

  it("names the server's day cap when it is the only budget that applies", () => {
    const { meter, count } = sharedMeter({ SVC_BUDGET_SERVER_DAY_USD: '20' });
    assert.equal(meter.refusal(asker('r1')), null);
    count(record('r1', UNPRICED));
    assert.equal(meter.refusal(asker('r1')), "this server's daily budget of $20.00 cannot be kept: model " +
      '"gpt-5-pro" has no price, so the gate cannot count what the run spent; the run stops here');
    assert.equal(meter.refusal(asker('r2')), null, 'another run is not refused');
  });

  it('records a run\'s uncounted calls only when no budget applies to it, and holds none of its calls', () => {
    const { meter, count } = sharedMeter({});
    assert.equal(meter.refusal(asker('r1')), null);
    count(record('r1', UNPRICED));
    assert.equal(meter.refusal(asker('r1')), null);
    const holds = [meter.hold?.(asker('r1')), meter.hold?.(asker('r1')), meter.hold?.(asker('r1'))];
    assert.ok(holds.every((h) => typeof h === 'function'));
  });
});

describe("a run's own gate's meter and calls it could not count", () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-uncounted-'));
  after(() => rmSync(home, { recursive: true, force: true }));

  /** runMeter over a run's state (as state.json has it) and the operator's environment. */
  function meterFor(fields: Partial<RunState>, env: NodeJS.ProcessEnv = {}) {
    const state = { repo: 'acme/web', budget_usd: null, cost_usd: null, metered: null, ...fields } as RunState;
    const update = (change: Partial<RunState>): void => void Object.assign(state, change);
    return runMeter({ env: { HOME: home, ...env }, state, update });
  }
  const call = (metered: MeteredCall) => ({ metered }) as EgressRecord;

  it("refuses the next model call at the run's max_usd once one had no price", () => {
    const meter = meterFor({ budget_usd: 5 });
    meter.count(call(PRICED));
    assert.equal(meter.gate.refusal(), null);
    meter.count(call(UNPRICED));
    assert.equal(meter.gate.refusal(), 'the run\'s budget of $5.00 cannot be kept: model "gpt-5-pro" has no price, ' +
      'so the gate cannot count what the run spent; the run stops here');
  });

  it("refuses the next model call at the repository's day cap once one's usage was unknown", () => {
    const meter = meterFor({}, { SVC_BUDGET_REPO_DAY_USD: '30' });
    meter.count(call({ ...UNPRICED, model: null, unknown: 'the response carried no usage' }));
    assert.equal(meter.gate.refusal(), 'the daily budget of $30.00 for acme/web cannot be kept: a model call\'s ' +
      'usage was unknown (the response carried no usage), so the gate cannot count what the run spent; ' +
      'the run stops here');
  });

  it('refuses a resumed run whose earlier calls include one it could not count', () => {
    const metered = { cost_usd: 0.01, tokens_in: 0, tokens_out: 10, calls: 2, unpriced: 1, unknown: 0 };
    const meter = meterFor({ budget_usd: 5, metered });
    assert.equal(meter.gate.refusal(), 'the run\'s budget of $5.00 cannot be kept: a model call of the run before it ' +
      'resumed could not be counted, so the gate cannot count what the run spent; the run stops here');
  });

  it('records uncounted calls only when no budget applies to the run', () => {
    const meter = meterFor({});
    meter.count(call(UNPRICED));
    assert.equal(meter.gate.refusal(), null);
  });
});
