// Metered cost and budgets at the gate, black-box: real `svc start` runs whose `command` agent calls the model API
// through the gate (each call $0.10 by the operator's price file) and reports a false cost of $0. The run is recorded
// at what the gate metered, with the $0 kept as reported; a $0.25 max_usd pauses it with the budget question and an
// answer "raise to $1" lets it finish; the next run of the same repository meets the per-repository daily cap at its
// first model call. The model API is a loopback stand-in.
import { startMeteredModel, type MeteredModel } from '../helpers/metered-model.ts';
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';


/**
 * Makes four model calls that succeed (retrying a refused one), writing each status to calls.txt, and reports $0.
 * Its own report is the lie the gate's meter does not believe.
 */
const LIAR = `#!/bin/sh
cat > /dev/null
echo '{"type":"svc.cost","usd":0,"tokens_in":0,"tokens_out":0}'
ok=0
while [ $ok -lt 4 ]; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" \\
    -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '{"model":"scripted-model"}')
  echo "$code" >> calls.txt
  if [ "$code" = 200 ]; then ok=$((ok+1)); else sleep 0.2; fi
done
echo done >> a.txt
exit 0
`;

/** Two model calls the API cuts after message_start (each asking for at most 1,000 output tokens), then one whole. */
const CUT = `#!/bin/sh
cat > /dev/null
for path in cut/messages cut/messages messages; do
  curl -s -o /dev/null -w '%{http_code}\\n' --max-time 20 "$ANTHROPIC_BASE_URL/v1/$path" \\
    -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \\
    -d '{"model":"scripted-model","max_tokens":1000}' >> calls.txt
done
echo done >> a.txt
exit 0
`;

describe('metered cost and budgets at the gate', { skip: !bwrapWorks && 'needs bubblewrap' }, () => {
  let repo: TestRepo;
  let model: MeteredModel;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    model = await startMeteredModel();
    repo = makeRepo({ providers: { liar: LIAR, cut: CUT }, policy: { max_usd: 0.25 } });
    const prices = join(repo.root, 'prices.json');
    // $100 per million output tokens: 1000 tokens are $0.10 a call.
    writeFileSync(prices, JSON.stringify({ date: '2026-11-28', models: { 'scripted-model': { input: 0, output: 100 } } }));
    env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_BASE_URL: `http://127.0.0.1:${(model.server.address() as AddressInfo).port}`,
      SVC_PRICES_FILE: prices,
    };
    delete env.SVC_SANDBOX;
  });
  after(() => {
    model.server.closeAllConnections();
    model.server.close();
    repo.cleanup();
  });

  const svc = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env: { ...env, ...extra } });
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  /** The run's state once it ended, else null. */
  const finished = (run: string) =>
    (['succeeded', 'failed', 'stopped'].includes(state(run).status) ? state(run) : null);
  const near = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≈ ${b}`);

  it('records the metered $0.40 beside a reported $0, pauses at the $0.25 budget and goes on once raised to $1',
    async () => {
      const start = await svc(['start', '--brief', 'spend', '--worktree', '--detach', '--provider', 'liar']);
      assert.equal(start.code, 0, start.stderr);
      const { run } = JSON.parse(start.stdout);
      const blocked = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'the budget question');
      assert.match(blocked.question, /^Budget of \$0\.25 reached — raise it to\? \(the run's budget of \$0\.25;/);
      assert.match(blocked.question, /metered by the gate/);
      assert.ok(blocked.metered.cost_usd >= 0.25, `metered ${blocked.metered.cost_usd} at the question`);
      assert.equal(blocked.cost_usd, blocked.metered.cost_usd, 'the run\'s cost is the metered one');

      assert.equal((await svc(['answer', `local/${run}`, 'raise to $1'])).code, 0);
      const done = await waitFor(() => finished(run),
        'the run to finish');
      assert.equal(done.status, 'succeeded', done.error);
      assert.equal(done.budget_usd, 1);
      near(done.cost_usd, 0.4);
      assert.deepEqual({ ...done.metered, cost_usd: 0 },
        { cost_usd: 0, tokens_in: 0, tokens_out: 4000, calls: 4, unpriced: 0, unknown: 0, tunnels: 0 });
      assert.deepEqual(done.reported, { cost_usd: 0, tokens_in: 0, tokens_out: 0 });
      const statuses = readFileSync(join(done.workdir, 'calls.txt'), 'utf8').trim().split('\n');
      assert.equal(statuses.filter((s) => s === '200').length, 4);
      assert.ok(statuses.every((s) => s === '200' || s === '429'), statuses.join(','));

      const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
      assert.equal(receipt.cost.source, 'metered');
      near(receipt.cost.usd, 0.4);
      assert.deepEqual(receipt.cost.reported, { cost_usd: 0, tokens_in: 0, tokens_out: 0 });
      // The gate is closed, and egress.jsonl saved, once the run has ended (src/engine/worker.ts): wait for it.
      const egressPath = join(repo.repo, '.svc', 'runs', run, 'artifacts', 'egress.jsonl');
      await waitFor(() => existsSync(egressPath) || null, 'egress.jsonl');
      const egress = readFileSync(egressPath, 'utf8')
        .trim().split('\n').map((l) => JSON.parse(l));
      const priced = egress.filter((r) => r.metered?.usd !== undefined && r.metered.usd !== null);
      assert.equal(priced.length, 4, 'each call is evidence with its tokens and price');
      assert.equal(priced[0].metered.model, 'scripted-model');
      for (const refused of egress.filter((r) => r.status === 429)) {
        assert.match(refused.reason, /the run's budget of \$0\.25 is reached/);
      }
    });

  it('refuses the next run of the repository at its daily cap, asks, and goes on once the cap is raised for it',
    async () => {
      const before = model.calls();
      writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ max_usd: 5 }));
      const start = await svc(['start', '--brief', 'spend again', '--worktree', '--detach', '--provider', 'liar'],
        { SVC_BUDGET_REPO_DAY_USD: '0.5' });
      assert.equal(start.code, 0, start.stderr);
      const { run } = JSON.parse(start.stdout);
      // The first run spent $0.40 today: this one's first call brings the repository to $0.50, its second is refused.
      const blocked = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'the cap question');
      assert.match(blocked.question, /^Budget of \$0\.50 reached — raise it to\? \(the daily budget of \$0\.50 for acme\/api;/);
      // The cap is the day's, reached with the first run's $0.40: the question (which goes to the run's origin) says
      // what this run spent, never the other runs' spending as its own.
      assert.match(blocked.question, /; the run has spent \$0\.10, metered by the gate\.\)/);
      assert.equal(model.calls() - before, 1, 'one call reached the model API before the cap');
      assert.equal((await svc(['answer', `local/${run}`, '$1'], { SVC_BUDGET_REPO_DAY_USD: '0.5' })).code, 0);
      const done = await waitFor(() => finished(run),
        'the run to finish');
      assert.equal(done.status, 'succeeded', done.error);
      assert.deepEqual(done.budget_caps, { repo_day: 1 });
      near(done.metered.cost_usd, 0.4);
      assert.equal(model.calls() - before, 4);
    });

  it('stops at a daily cap the day\'s earlier runs filled, saying what this run spent, not theirs', async () => {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ max_usd: 5 }));
    const cap = { SVC_BUDGET_REPO_DAY_USD: '0.5' };
    const argv = ['start', '--brief', 'spend at a full cap', '--worktree', '--detach', '--provider', 'liar'];
    const start = await svc(argv, cap);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout);
    // The earlier runs spent $0.80 of the repository's day: this one's first call is refused.
    const blocked = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'the cap question');
    assert.match(blocked.question, /the run has spent \$0\.00, metered by the gate/);
    assert.equal((await svc(['answer', `local/${run}`, 'stop'], cap)).code, 0);
    const done = await waitFor(() => finished(run),
      'the run to stop');
    assert.equal(done.status, 'stopped', done.error);
    assert.equal(done.error, 'Stopped at the daily budget of $0.50 for acme/api: the run spent $0.00');
  });

  it('ends the run over budget when the question is still unanswered at the end of the run\'s time', async () => {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ max_usd: 0.05, limits: { run_timeout_s: 8 } }));
    const start = await svc(['start', '--brief', 'spend, nobody answers', '--worktree', '--detach', '--provider', 'liar']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout);
    const blocked = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'the budget question');
    assert.match(blocked.question, /^Budget of \$0\.05 reached/);
    const done = await waitFor(() => finished(run),
      'the run\'s time to end');
    assert.equal(done.status, 'stopped');
    assert.match(done.error, /^the run's budget of \$0\.05 was reached and not raised within the run's time/);
    assert.equal(done.question, null);
    near(done.metered.cost_usd, 0.1);
  });

  it('counts calls the API cut after message_start at the request\'s max_tokens, and the run goes on', async () => {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ max_usd: 1 }));
    const start = await svc(['start', '--brief', 'cut streams', '--worktree', '--detach', '--provider', 'cut']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout);
    const ended = () => ['succeeded', 'failed', 'stopped'].includes(state(run).status);
    const done = await waitFor(() => (ended() ? state(run) : null), 'the run to finish');
    assert.equal(done.status, 'succeeded', done.error);
    // Each cut call: 1,000 output tokens at most ($0.10), as the whole one said it used.
    near(done.metered.cost_usd, 0.3);
    assert.deepEqual({ ...done.metered, cost_usd: 0 },
      { cost_usd: 0, tokens_in: 0, tokens_out: 3000, calls: 3, unpriced: 0, unknown: 2, tunnels: 0 });
    assert.deepEqual(readFileSync(join(done.workdir, 'calls.txt'), 'utf8').trim().split('\n'), ['200', '200', '200']);
  });
});
