// A stop that comes while a resume's worker starts, before it wrote `running`: the run ends stopped and its agent
// never runs again (before, the stop found the run it resumed from, already ended, signalled nothing, and the resumed
// run went on).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { stopLocalRun } from '../../src/engine/run-context.ts';
import { readState, writeState } from '../../src/engine/run-state.ts';
import { runFailure } from '../../src/run-json.ts';
import { GIT_ENV, makeRepo, type TestRepo } from './fixtures.ts';

describe('a stop while a resume starts its worker', () => {
  let t: TestRepo;
  before(() => {
    t = makeRepo();
  });
  after(() => t.cleanup());

  it('ends the resumed run stopped, its agent not run again', async () => {
    const env = { ...process.env, ...GIT_ENV, HOME: t.home, SVC_SHIP: '0', SVC_SANDBOX: 'none' };
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: t.repo, runId: null,
      env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    // Stopped before its worker ever started: what a resume moves on from.
    const ended_at = new Date().toISOString();
    writeState(dir, { ...state, status: 'stopped', ended_at, failure: runFailure('stopped', 'stopped by a test') });
    const worker = spawnWorker(readState(dir), 'resume', env, false);
    const exited = once(worker, 'exit');
    await stopLocalRun(t.repo, state.run, 'svc start --stop');
    await exited;
    const final = readState(dir);
    assert.deepEqual([final.status, final.failure], ['stopped', runFailure('stopped', 'stopped by svc start --stop')]);
    assert.equal(readFileSync(join(t.repo, 'a.txt'), 'utf8'), 'hello\n', 'the agent ran');
  });
});
