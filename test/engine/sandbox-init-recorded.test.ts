// The worker records its agent's (and each check's) sandbox init in state.json as soon as bwrap reports it, so a stop
// from outside can end an init that outlived its worker (dead-worker-stop.test.ts stops one).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { stopLocalRun } from '../../src/engine/run-context.ts';
import { procStart } from '../../src/proc-stat.ts';
import { readState, type RunState } from '../../src/engine/run-state.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { EDIT_SCRIPT, GIT_ENV, SLEEP_SCRIPT, makeRepo, type TestRepo } from './fixtures.ts';

describe('a sandboxed run\'s state', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, () => {
  let t: TestRepo;
  let env: NodeJS.ProcessEnv;
  before(() => {
    // Its check says it is up in the checkout, then runs until stopped.
    t = makeRepo({
      providers: { sleeper: SLEEP_SCRIPT, fake: EDIT_SCRIPT },
      policy: { checks: [{ name: 'held', run: ['sh', '-c', 'echo up > check.up; exec sleep 60'] }] },
    });
    env = {
      ...process.env, ...GIT_ENV, HOME: t.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9',
    };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
  });
  after(() => t.cleanup());

  /** Starts a run of `provider` in its own worktree; once `up` (a file) exists, its state's child as soon as it names
   * an init (or after 60 s), and whether that init was the process running then; then the run is stopped. */
  async function recordedWhenUp(
    provider: string, up: (run: RunState) => string,
  ): Promise<{ child: RunState['child']; running: boolean }> {
    const { state } = await prepareRun({
      input: `task for ${provider}`, forceBrief: true, pr: false, worktree: true, provider, repo: t.repo, runId: null,
      env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    const worker = spawnWorker(state, 'start', env, false);
    const exited = once(worker, 'exit');
    try {
      for (const deadline = Date.now() + 60_000; !existsSync(up(state)) && Date.now() < deadline;) await sleep(20);
      assert.ok(existsSync(up(state)), `${up(state)} was never written`);
      let child = readState(dir).child;
      // Its agent and check run until stopped, so a loaded machine gets as long as it needs to record the init.
      for (const deadline = Date.now() + 60_000; !child?.init && Date.now() < deadline; child = readState(dir).child) {
        await sleep(20);
      }
      return { child, running: !!child?.init && procStart(child.init.pid) === child.init.proc_start };
    } finally {
      await stopLocalRun(t.repo, state.run, 'the test');
      await exited;
    }
  }

  it('names its agent\'s sandbox init while the agent runs', async () => {
    const { child, running } = await recordedWhenUp('sleeper', (run) => join(t.home, 'agent-state', `${run.run}.up`));
    assert.ok(child?.init, 'no init recorded');
    assert.ok(running, 'the init recorded is not the one running');
    assert.notEqual(child.init.pid, child.pid, 'the init is not bwrap itself');
  });

  it('names a check\'s sandbox init while the check runs', async () => {
    const checkUp = (run: RunState) => join(t.repo, '.svc', 'worktrees', run.run, 'check.up');
    const { child, running } = await recordedWhenUp('fake', checkUp);
    assert.ok(child?.init, 'no init recorded');
    assert.ok(running, 'the init recorded is not the one running');
    assert.notEqual(child.init.pid, child.pid, 'the init is not bwrap itself');
  });
});
