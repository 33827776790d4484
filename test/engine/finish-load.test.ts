// The worker loads its finish phase while the agent works (src/engine/worker.ts, loadFinish): a load that fails is
// the run's failure only where the finish needs it, saying so; a run stopped during its agent stays stopped.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prepareRun } from '../../src/engine/launch.ts';
import { readState } from '../../src/engine/run-state.ts';
import { runFailure } from '../../src/run-json.ts';
import { AGENT_STATE, EDIT_SCRIPT, repoForTests, SLEEP_SCRIPT } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const WORKER_TS = fileURLToPath(new URL('../../src/engine/worker.ts', import.meta.url));

/** A worker process for the run in `dir` in which src/engine/finish-phase.ts cannot be loaded. */
function workerWithoutFinish(dir: string, env: NodeJS.ProcessEnv) {
  const script = [
    "import { registerHooks } from 'node:module';",
    'registerHooks({ load(url, context, next) {',
    "  if (url.endsWith('/src/engine/finish-phase.ts')) throw new Error('a test refused the module');",
    '  return next(url, context);',
    '} });',
    `const { executeRun } = await import(${JSON.stringify(WORKER_TS)});`,
    `process.exitCode = await executeRun(${JSON.stringify(dir)}, process.env, 'start', () => {});`,
  ].join('\n');
  return spawn(process.execPath, ['--input-type=module', '-e', script], { env, stdio: 'ignore' });
}

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
    const worker = workerWithoutFinish(dir, t.env);
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
    const [code] = await once(workerWithoutFinish(dir, t.env), 'exit');
    assert.equal(code, 1);
    const final = readState(dir);
    assert.equal(final.status, 'failed');
    assert.equal(final.failure?.class, 'infra');
    assert.equal(final.failure?.retryable, true);
    assert.match(final.failure?.reason ?? '', /^svc could not load its finish phase: /);
    assert.equal(final.infra_retries ?? 0, 0, 'retried automatically after the agent ran');
  });
});
