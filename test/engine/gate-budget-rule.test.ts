// A local run's own gate keeps the budget rule `svc gate serve` keeps (docs/gate.md "Budgets"): a model with no price
// leaves a budget unkept, so the run's next model call is refused and the run asks; and a budgeted run has at most 2
// model calls under way, so calls started at once cannot all pass before the first is counted.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

// Reports $0 (what the agent says is not what the gate counts), then makes model calls one after another, as a CLI
// does: a refused one is tried again.
const SEQUENTIAL = `#!/bin/sh
cat > /dev/null
echo '{"type":"svc.cost","usd":0,"tokens_in":0,"tokens_out":0}'
i=0
while [ $i -lt 20 ]; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" \\
    -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \\
    -d '{"model":"claude-unpriced-x","max_tokens":100000}')
  echo "$code" >> calls.txt
  if [ "$code" = 200 ]; then i=$((i+1)); else sleep 0.2; fi
done
exit 0
`;

// A model call whose request the gate cannot read (an escaped key), so it is counted in doubt, then another.
const DOUBTED = `#!/bin/sh
cat > /dev/null
for i in 1 2; do
  curl -s -o /dev/null -w '%{http_code}\\n' --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" \\
    -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \\
    -d '{"model":"scripted-model","max_tok\\u0065ns":1000}' >> calls.txt
done
exit 0
`;

// Starts 20 priced model calls at once ($0.10 each at the test's prices).
const PARALLEL = `#!/bin/sh
cat > /dev/null
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  ( curl -s -o /dev/null -w '%{http_code}\\n' --max-time 20 "$ANTHROPIC_BASE_URL/v1/messages" \\
    -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \\
    -d '{"model":"scripted-model","max_tokens":1000}' >> calls.txt ) &
done
wait
exit 0
`;

describe('a local run\'s gate keeps the shared gate\'s budget rule', () => {
  let repo: TestRepo;
  let server: Server;
  let env: NodeJS.ProcessEnv;
  const upstream: string[] = [];

  before(async () => {
    // The model API: answers each call after 1.5 s with the usage of the model it was asked for.
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const model = (JSON.parse(body) as { model: string }).model;
        upstream.push(model);
        const out = model === 'scripted-model' ? 1000 : 100_000;
        // The escaped key's call gets an answer without usage: counted at its bounds, which its request did not set.
        const usage = body.includes('\\u0065') ? {} : { usage: { input_tokens: 0, output_tokens: out } };
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ model, ...usage }));
        }, model === 'scripted-model' ? 1500 : 0);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const providers = { sequential: SEQUENTIAL, parallel: PARALLEL, doubted: DOUBTED };
    repo = makeRepo({ providers, policy: { max_usd: 0.25 } });
    const prices = join(repo.root, 'prices.json');
    const models = { 'scripted-model': { input: 0, output: 100 } };
    writeFileSync(prices, JSON.stringify({ date: '2026-11-28', models }));
    const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      ANTHROPIC_API_KEY: 'sk-ant-real', ANTHROPIC_BASE_URL: api,
      SVC_PRICES_FILE: prices,
    };
    delete env.SVC_SANDBOX;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    repo.cleanup();
  });

  const svc = (args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  const start = async (provider: string): Promise<string> => {
    const started = await svc(['start', '--brief', 'spend', '--worktree', '--detach', '--provider', provider]);
    assert.equal(started.code, 0, started.stderr);
    return JSON.parse(started.stdout).run;
  };
  const ended = (run: string) => waitFor(() => {
    const s = state(run);
    return ['succeeded', 'failed', 'stopped', 'blocked'].includes(s.status) ? s : null;
  }, 'the run to end or ask', 60_000);
  const codes = (run: string): string[] =>
    readFileSync(join(state(run).workdir, 'calls.txt'), 'utf8').trim().split('\n');

  it('refuses the call after an unpriced one and asks; "yes" lets one more through, "no" stops', async () => {
    upstream.length = 0;
    const run = await start('sequential');
    const asked = await ended(run);
    assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
    assert.deepEqual(upstream, ['claude-unpriced-x'], 'one call reached the API');
    assert.ok(asked.question.startsWith('the run\'s budget of $0.25 cannot be kept: model "claude-unpriced-x" has ' +
      'no price, so the gate cannot count what the run spent'), asked.question);
    assert.equal(asked.metered.unpriced, 1);
    // A raise goes on past the call not counted so far; the next one not counted asks again.
    assert.equal((await svc(['answer', `local/${run}`, 'yes'])).code, 0);
    const again = await waitFor(() => {
      const s = state(run);
      return s.status === 'blocked' && s.budget_usd === 0.5 ? s : null;
    }, 'the question after the raise', 60_000);
    assert.equal(again.metered.unpriced, 2);
    assert.equal(upstream.length, 2);
    assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
    const done = await waitFor(() => (state(run).status === 'stopped' ? state(run) : null), 'the run to stop', 60_000);
    assert.match(done.error, /^Stopped at the max_usd budget/);
    assert.equal(upstream.length, 2, 'no call after the "no"');
  });

  it('refuses the call after one counted in doubt and asks', async () => {
    upstream.length = 0;
    const run = await start('doubted');
    const asked = await ended(run);
    assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
    assert.equal(upstream.length, 1);
    assert.ok(asked.question.startsWith('the run\'s budget of $0.25 cannot be kept: a model call may have cost more ' +
      'than its bounds (its request was not read: '), asked.question);
    assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
    await waitFor(() => (state(run).status === 'stopped' ? state(run) : null), 'the run to stop', 60_000);
    assert.equal(upstream.length, 1, 'the second call never reached the API');
  });

  it('holds a budgeted run to 2 model calls under way: the others are refused, 429', async () => {
    upstream.length = 0;
    const run = await start('parallel');
    const done = await ended(run);
    assert.equal(upstream.length, 2, `${upstream.length} calls reached the API`);
    assert.deepEqual(codes(run).sort(), [...Array(2).fill('200'), ...Array(18).fill('429')]);
    assert.equal(done.metered.calls, 2);
    assert.ok(Math.abs(done.cost_usd - 0.2) < 1e-9, `cost ${done.cost_usd}`);
  });
});

// The CLI spent $5 through a path the gate cannot read (its vendor's login over a CONNECT tunnel) and says so; before
// that, one free call through the gate (a stored-completions list: no usage, metered unknown at $0).
const HIDDEN_BY_FREE_CALL = `#!/bin/sh
cat > /dev/null
curl -s -o /dev/null --max-time 20 "$OPENAI_BASE_URL/chat/completions"
echo '{"type":"svc.cost","usd":5,"tokens_in":1000000,"tokens_out":100000}'
exit 0
`;

// One call through the gate ($0.01 of gpt-5 by svc's table), then the CLI's own estimate of $5 (claude prints one),
// exiting `code`; `first` runs before the call (a CONNECT tunnel, whose TLS the gate does not read, to another
// vendor's API; or an exit at once, resumed after the call was made).
const estimated = (first: string, code = 0) => `#!/bin/sh
cat > /dev/null
${first}
curl -s -o /dev/null --max-time 20 -H 'content-type: application/json' \\
  -d '{"model":"gpt-5","max_tokens":1000,"messages":[]}' "$OPENAI_BASE_URL/chat/completions"
echo '{"type":"svc.cost","usd":5,"tokens_in":1000000,"tokens_out":100000}'
echo spent > spent.txt
exit ${code}
`;

// A priced model call ($0.01) each session; the first reports $0.50 and fails, a resumed one reports $5 and succeeds.
const CALLS_AGAIN = `#!/bin/sh
cat > /dev/null
curl -s -o /dev/null --max-time 20 -H 'content-type: application/json' \\
  -d '{"model":"gpt-5","max_tokens":1000,"messages":[]}' "$OPENAI_BASE_URL/chat/completions"
if [ -f spent.txt ]; then usd=5; code=0; else usd=0.5; code=1; fi
echo "{\\"type\\":\\"svc.cost\\",\\"usd\\":$usd}"
echo spent > spent.txt
exit $code
`;

describe('a local run\'s budget holds on the larger of its metered and reported cost', () => {
  let server: Server;
  let vendor: Server;
  let repo: TestRepo;
  const seen: string[] = [];
  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push(`${req.method} ${req.url}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.method === 'POST') {
          res.end(JSON.stringify({ model: 'gpt-5', usage: { prompt_tokens: 0, completion_tokens: 1000 } }));
        } else res.end(JSON.stringify({ object: 'list', data: [] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // Another vendor's API, whose key the gate does not hold (a tunnel to the held one is refused): the CLI's own
    // login may tunnel there, and the operator allows it.
    vendor = createServer((_req, res) => res.end());
    await new Promise<void>((resolve) => vendor.listen(0, '127.0.0.1', resolve));
    const api = `127.0.0.1:${(vendor.address() as AddressInfo).port}`;
    const tunnel = `curl -s -o /dev/null --max-time 20 -p -x "$HTTPS_PROXY" "http://${api}/" || true`;
    repo = makeRepo({
      providers: { hidden: HIDDEN_BY_FREE_CALL, estimated: estimated(''), tunneled: estimated(tunnel),
        failing: estimated('[ -f spent.txt ] && exit 0', 1),
        'calling-again': CALLS_AGAIN },
      policy: { max_usd: 1 },
    });
    const operator = join(repo.home, '.svc', 'operator.json');
    writeFileSync(operator, JSON.stringify({ ...readJson(operator), network: { allow: [api] } }));
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    vendor.close();
    repo.cleanup();
  });

  const svc = (args: string[]) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      OPENAI_API_KEY: 'sk-real', OPENAI_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    };
    delete env.SVC_SANDBOX;
    return runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });
  };
  /** Starts a run of `provider`; its state.json once it ended or asked, and its id. */
  async function ranOrAsked(provider: string) {
    const started = await svc(['start', '--brief', 'spend', '--worktree', '--detach', '--provider', provider]);
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    const state = () => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    const ended = await waitFor(() => {
      const s = state();
      return ['succeeded', 'failed', 'stopped', 'blocked'].includes(s.status) ? s : null;
    }, 'the run to end or ask', 60_000);
    return { run, state, ended };
  }
  /** Resumes a failed run from its state.json as `edit` leaves it; its state once it ended or asked. Edited only once
   * its worker is gone: that worker's last write (no pid) puts back its own copy of the file. */
  async function resumedFrom(run: string, state: () => any, edit: (failed: any) => unknown) {
    const failed = await waitFor(() => (state().pid === null ? state() : null), 'the failed run\'s worker to go');
    writeFileSync(join(repo.repo, '.svc', 'runs', run, 'state.json'), JSON.stringify(edit(failed)));
    const resumed = await svc(['start', '--resume', run, '--detach']);
    assert.equal(resumed.code, 0, resumed.stderr);
    return waitFor(() => {
      const s = state();
      return ['succeeded', 'failed', 'stopped', 'blocked'].includes(s.status) ? s : null;
    }, 'the resumed run to end or ask', 60_000);
  }

  it('a free call metered at $0 neither hides the reported $5 from max_usd $1 nor becomes the run\'s cost',
    async () => {
      const { run, state, ended: asked } = await ranOrAsked('hidden');
      assert.deepEqual(seen, ['GET /v1/chat/completions'], 'the free call went through the gate');
      assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
      assert.match(asked.question, /^Budget of \$1\.00 reached .*the run has spent \$5\.00, as the agent reported/);
      assert.deepEqual([asked.metered.calls, asked.metered.unknown, asked.metered.cost_usd], [1, 1, null]);
      assert.equal(asked.cost_usd, 5);
      assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
      await waitFor(() => (state().status === 'stopped' ? state() : null), 'the run to stop', 60_000);
    });

  // The operator's price file, not a CLI's own list-price estimate, decides what a run the gate saw whole spent.
  it('every call metered and priced: the metered $0.01 decides, the CLI\'s estimate of $5 does not', async () => {
    const { ended } = await ranOrAsked('estimated');
    assert.equal(ended.status, 'succeeded', `${ended.status}: ${ended.question ?? ended.error}`);
    assert.deepEqual([ended.metered.calls, ended.metered.cost_usd, ended.metered.tunnels], [1, 0.01, 0]);
    assert.equal(ended.reported.cost_usd, 5);
  });

  it('a CONNECT tunnel first: the gate may have missed a call, so the larger report holds the budget', async () => {
    const { run, state, ended: asked } = await ranOrAsked('tunneled');
    assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
    assert.match(asked.question, /^Budget of \$1\.00 reached .*the run has spent \$5\.00, as the agent reported/);
    assert.deepEqual([asked.metered.calls, asked.metered.tunnels], [1, 1]);
    assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
    await waitFor(() => (state().status === 'stopped' ? state() : null), 'the run to stop', 60_000);
  });

  // A run that failed under an older svc, resumed after the upgrade: its state.json's metered figures count no
  // tunnels, so the gate may have missed a call, and the larger report holds the budget.
  it('resumed from a state.json that does not count tunnels (an older svc\'s): the larger report holds the budget',
    async () => {
      const { run, state, ended: failed } = await ranOrAsked('failing');
      assert.equal(failed.status, 'failed', failed.error);
      assert.deepEqual([failed.metered.cost_usd, failed.metered.tunnels, failed.reported.cost_usd], [0.01, 0, 5]);
      const asked = await resumedFrom(run, state, (last) => {
        delete last.metered.tunnels;
        return last;
      });
      assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
      assert.match(asked.question, /^Budget of \$1\.00 reached .*the run has spent \$5\.00, as the agent reported/);
      assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
      await waitFor(() => (state().status === 'stopped' ? state() : null), 'the run to stop', 60_000);
    });

  // Nothing known of what the earlier sessions' gates saw (no metered figures: an older gate's run that opened only
  // tunnels; or figures svc does not write): the resumed session's call alone is no whole metered figure.
  for (const [earlier, metered] of [['no metered figures', null], ['metered figures svc does not write',
    { cost_usd: 'x' }]] as const) {
    it(`resumed from a state.json with ${earlier}: the larger report holds the budget`, async () => {
      const { run, state, ended: failed } = await ranOrAsked('calling-again');
      assert.equal(failed.status, 'failed', failed.error);
      const asked = await resumedFrom(run, state, (last) => ({ ...last, metered }));
      assert.equal(asked.status, 'blocked', `${asked.status}: ${asked.error}`);
      assert.match(asked.question, /^Budget of \$1\.00 reached .*as the agent reported/);
      assert.deepEqual([asked.metered.calls, asked.metered.cost_usd, 'tunnels' in asked.metered], [1, 0.01, false]);
      assert.equal((await svc(['answer', `local/${run}`, 'no'])).code, 0);
      await waitFor(() => (state().status === 'stopped' ? state() : null), 'the run to stop', 60_000);
    });
  }
});
