// A sandboxed run's gate listens before the agent and loads its forwarding in the turn after the agent's spawn
// (src/engine/worker.ts, src/gate/gate.ts): a load that fails closes the gate, stops the agent and fails the run.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prepareRun } from '../../src/engine/launch.ts';
import { readState } from '../../src/engine/run-state.ts';
import { processesMentioning, repoForTests, SLEEP_SCRIPT } from './fixtures.ts';

const WORKER_TS = fileURLToPath(new URL('../../src/engine/worker.ts', import.meta.url));

/** A worker process for the run in `dir` in which src/gate/forward.ts cannot be loaded. */
function workerWithoutForwarding(dir: string, env: NodeJS.ProcessEnv) {
  const script = [
    "import { registerHooks } from 'node:module';",
    'registerHooks({ load(url, context, next) {',
    "  if (url.endsWith('/src/gate/forward.ts')) throw new Error('a test refused the module');",
    '  return next(url, context);',
    '} });',
    `const { executeRun } = await import(${JSON.stringify(WORKER_TS)});`,
    `process.exitCode = await executeRun(${JSON.stringify(dir)}, process.env, 'start', () => {});`,
  ].join('\n');
  return spawn(process.execPath, ['--input-type=module', '-e', script], { env, stdio: 'ignore' });
}

describe("a sandboxed worker whose gate's forwarding cannot be loaded", () => {
  const t = repoForTests({ providers: { sleeper: SLEEP_SCRIPT } });

  it('stops its agent and fails the run, class infra, saying the egress gate could not load', async () => {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'sleeper', repo: t.repo,
      runId: null, env: t.env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    // The agent runs until stopped: only the failed load ends this run.
    const [code] = await once(workerWithoutForwarding(dir, t.env), 'exit');
    assert.equal(code, 1);
    const final = readState(dir);
    assert.equal(final.status, 'failed');
    assert.equal(final.failure?.class, 'infra');
    assert.match(final.error ?? '', /^the run's egress gate could not load: .*a test refused the module/);
    assert.deepEqual(processesMentioning(`svc-grandchild-${state.run}`), [], 'nothing of the agent is left');
  });
});
