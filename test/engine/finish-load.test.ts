// The worker loads its finish phase while the agent works (src/engine/worker.ts, loadFinish): a load that fails is
// the run's failure only where the finish needs it, saying so; a run stopped during its agent stays stopped.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { prepareRun } from '../../src/engine/launch.ts';
import { readState } from '../../src/engine/run-state.ts';
import { runFailure } from '../../src/run-json.ts';
import { AGENT_STATE, EDIT_SCRIPT, repoForTests, SLEEP_SCRIPT, workerRefusing } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

describe('a worker whose finish phase cannot be loaded', () => {
  const t = repoForTests({ providers: { fake: EDIT_SCRIPT, sleeper: SLEEP_SCRIPT } }, { SVC_SANDBOX: 'none' }, true);

  async function queuedRun(provider: string): Promise<{ dir: string; run: string }> {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider, repo: t.repo, runId: null,
      env: t.env,
    });
    return { dir: join(t.repo, '.svc', 'runs', state.run), run: state.run };
  }

  it('ends a run stopped during its agent stopped', async () => {
    const { dir, run } = await queuedRun('sleeper');
    const worker = workerRefusing('src/engine/finish-phase.ts', dir, t.env);
    const exited = once(worker, 'exit');
    await waitFor(() => existsSync(join(t.home, AGENT_STATE, `${run}.up`)), 'the agent to be up');
    // The worker's own stop (a stopper such as `svc start --stop` writes `stopped` itself once the worker is gone).
    worker.kill('SIGTERM');
    await exited;
    const final = readState(dir);
    const failure = runFailure('stopped', "stopped by a SIGTERM to the run's worker");
    assert.deepEqual([final.status, final.failure], ['stopped', failure]);
  });

  it('fails the run after its agent, class infra, saying svc could not load its finish phase', async () => {
    const { dir } = await queuedRun('fake');
    const [code] = await once(workerRefusing('src/engine/finish-phase.ts', dir, t.env), 'exit');
    assert.equal(code, 1);
    const final = readState(dir);
    assert.equal(final.status, 'failed');
    assert.equal(final.failure?.class, 'infra');
    assert.equal(final.failure?.retryable, true);
    assert.match(final.failure?.reason ?? '', /^svc could not load its finish phase: /);
    assert.equal(final.infra_retries ?? 0, 0, 'retried automatically after the agent ran');
  });
});
