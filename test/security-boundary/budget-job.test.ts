// The budget during an invocation of a run the trigger server started (the same boundary
// holds for a /jobs job, not only the CLI): a `command` provider that reports cost line by line is frozen at max_usd
// and the run asks; "no" ends the provider, the checks still run and the receipt is issued for what exists.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, processesMentioning, procState, readJson, SLOW_SPENDER, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

const API_TOKEN = 'budget-job-api-token-0123456789';

describe('the budget during an invocation of a /jobs job', () => {
  let repo: TestRepo;
  let trigger: Served;
  const auth = { authorization: `Bearer ${API_TOKEN}` };

  before(async () => {
    repo = makeRepo({
      providers: { spender: SLOW_SPENDER },
      policy: { max_usd: 1, checks: [{ name: 'partial', run: ['grep', '-q', 'partial work', 'a.txt'] }] },
    });
    const config = JSON.parse(readFileSync(join(repo.repo, '.svc', 'config.json'), 'utf8'));
    writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify({ ...config, provider: 'spender' }));
    const env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_API_TOKEN: API_TOKEN,
      SVC_CONTROL_URL: 'http://127.0.0.1:9',
      SVC_TRIGGER_DB: join(repo.root, 'trigger.db'), SVC_SANDBOX: process.env.SVC_SANDBOX };
    if (env.SVC_SANDBOX === undefined) delete env.SVC_SANDBOX;
    trigger = await serve(['trigger', 'serve', '--port', '0', '--repo', repo.repo], env);
  });
  after(async () => {
    await stop(trigger);
    for (const pid of processesMentioning(join(repo.bin, 'spender.sh'))) process.kill(pid, 'SIGKILL');
    repo.cleanup();
  });

  it('freezes the provider at max_usd and asks; "no" ends it, runs the checks and issues a receipt', async () => {
    const posted = await fetch(`${trigger.url}/jobs`, {
      method: 'POST', body: JSON.stringify({ brief: 'spend slowly' }), headers: { ...auth, 'content-type': 'application/json' },
    });
    const body = await posted.text();
    assert.equal(posted.status, 202, body);
    const { job_id: id } = JSON.parse(body) as { job_id: string };
    const job = await waitFor(async () => {
      const j = (await (await fetch(`${trigger.url}/jobs/${id}`, { headers: auth })).json()) as any;
      return j.run ? j : null;
    }, 'the job to have a run', 60_000);
    const run: string = job.run.run;
    const state = () => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    const provider = () => processesMentioning(join(repo.bin, 'spender.sh'));

    const asked = await waitFor(() => (existsSync(join(repo.repo, '.svc', 'runs', run, 'state.json')) &&
      state().status === 'blocked' ? state() : null), 'the budget question', 60_000);
    assert.match(asked.question, /^Budget of \$1\.00 reached — raise it to\? \(the run's budget of \$1\.00;/);
    assert.equal(asked.origin, 'jobs');
    assert.ok(provider().length > 0);
    assert.deepEqual(provider().map(procState).filter((s) => s !== 'T' && s !== 'D'), [], 'frozen while it asks');

    const answered = await runChild(process.execPath, [CLI, 'answer', `${job.run.source}/${run}`, 'no, stop here'], {
      cwd: repo.repo, env: { PATH: process.env.PATH, HOME: repo.home, LANG: 'C' },
    });
    assert.equal(answered.code, 0, answered.stderr);
    const done = await waitFor(() => (state().status === 'stopped' ? state() : null), 'the run to stop at the budget', 60_000);
    assert.match(done.error, /Stopped at the max_usd budget/);
    assert.deepEqual(provider(), [], 'nothing of the provider is left');
    const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
    assert.equal(receipt.verdict, 'not_verified');
    assert.equal(receipt.checks[0].exit_code, 0);
    const finished = await waitFor(async () => {
      const j = (await (await fetch(`${trigger.url}/jobs/${id}`, { headers: auth })).json()) as any;
      return ['succeeded', 'failed', 'interrupted'].includes(j.status) ? j : null;
    }, 'the job to finish', 60_000);
    assert.equal(finished.run.run, run);
  });
});
