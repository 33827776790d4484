// max_usd enforced while the provider runs: a `command` provider that reports cost line by line and
// never exits by itself is frozen and asked at the budget; "yes" thaws it with another max_usd, "no" ends it, and the
// checks still run and a receipt is issued for what exists.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  makeRepo, readJson, processesEnded, processesMentioning, procState, SLOW_SPENDER, CLI, GIT_ENV, type TestRepo,
} from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

describe('the budget during an invocation', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({
      providers: { spender: SLOW_SPENDER },
      policy: { max_usd: 1, checks: [{ name: 'partial', run: ['grep', '-q', 'partial work', 'a.txt'] }] },
    });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0' };
  });
  // The detached workers go on past their run's end (its last writes): a folder removed under them is left half there.
  after(async () => {
    await processesEnded(repo.root);
    repo.cleanup();
  });

  const svc = (args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  // The provider's processes: its script, and the bwraps whose argv name it (by full path: other checkouts on this
  // machine may run the same test at the same time).
  const provider = () => processesMentioning(join(repo.bin, 'spender.sh'));

  it('freezes the provider at max_usd, thaws it on "yes", and on "no" ends it, runs the checks and issues a receipt', async () => {
    const start = await svc(['start', '--brief', 'spend slowly', '--worktree', '--detach', '--provider', 'spender']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout);

    const first = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'the budget question');
    assert.match(first.question, /^Budget of \$1\.00 reached — raise it to\? \(the run's budget of \$1\.00;/);
    assert.ok(first.cost_usd >= 1 && first.cost_usd < 2, `cost ${first.cost_usd}`);
    // Frozen before the question was asked: every process of the provider is stopped now ('D' is one caught inside a
    // fork, whose SIGSTOP takes effect as the fork returns).
    assert.ok(provider().length > 0);
    assert.deepEqual(provider().map(procState).filter((s) => s !== 'T' && s !== 'D'), []);

    assert.equal((await svc(['answer', `local/${run}`, 'yes'])).code, 0);
    const second = await waitFor(() => {
      const s = state(run);
      return s.status === 'blocked' && s.budget_usd === 2 ? s : null;
    }, 'the provider to run on and reach the extended budget');
    assert.ok(second.cost_usd >= 2, `cost ${second.cost_usd}`);

    assert.equal((await svc(['answer', `local/${run}`, 'no, stop here'])).code, 0);
    const done = await waitFor(() => (state(run).status === 'stopped' ? state(run) : null), 'the run to stop at the budget');
    assert.match(done.error, /Stopped at the max_usd budget: spent \$2\.\d\d of \$2\.00/);
    assert.deepEqual(provider(), [], 'nothing of the provider is left');
    const artifacts = join(repo.repo, '.svc', 'runs', run, 'artifacts');
    assert.ok(existsSync(join(artifacts, 'checks', 'partial.log')), 'the checks ran');
    const receipt = JSON.parse(readFileSync(join(artifacts, 'receipt.json'), 'utf8'));
    assert.equal(receipt.verdict, 'not_verified');
    assert.equal(receipt.checks[0].exit_code, 0);
    assert.equal(receipt.diff.files, 1);
  });
});
