// A resume, a verify or an --open-pr waits for a run's worker (afterLastWorker), then goes on to its first write. An
// --open-pr records itself as the run's worker only once it opens the run, a moment later: one that came between (a
// second --open-pr, a double click in the dashboard) holds the run by then. The last read before the first write
// refuses it, rather than write the run over that worker's and ship it beside it. Each call here is made then.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { openPrLater } from '../../src/engine/finish-phase.ts';
import { procStart } from '../../src/proc-stat.ts';
import { readState, writeState, type RunState } from '../../src/engine/run-state.ts';
import { runFailure } from '../../src/run-json.ts';
import { ConflictError } from '../../src/errors.ts';
import { idleNode } from '../helpers/run-child.ts';
import { CLI, repoForTests } from './fixtures.ts';

describe('a run an --open-pr holds', () => {
  const t = repoForTests({}, { SVC_SANDBOX: 'none' });

  /**
   * `act` on a failed --pr run whose PR was not opened, held by a live `svc start --open-pr` of it (`pid`); then the
   * run must be as that one holds it. `act` returns any worker it started, which is ended here.
   */
  async function whileHeld(act: (dir: string, pid: number) => Promise<ChildProcess | undefined>) {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: t.repo, runId: null,
      env: t.env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    // In the project, as `svc start` is: an --open-pr elsewhere is another project's (ids are per project).
    const opener = await idleNode([CLI, 'start', '--open-pr', state.run], { cwd: t.repo });
    const held: RunState = {
      ...state, pr: true, status: 'failed', ended_at: new Date().toISOString(),
      failure: runFailure('infra', 'the pull request could not be opened'),
      pid: opener.pid!, pgid: null, proc_start: procStart(opener.pid!),
    };
    writeState(dir, held);
    let started: ChildProcess | undefined;
    try {
      started = await act(dir, opener.pid!);
      assert.deepEqual(readState(dir), held, 'the run as the --open-pr holds it');
    } finally {
      started?.kill('SIGKILL');
      opener.kill('SIGKILL');
      await once(opener, 'exit');
    }
  }

  const refusal = (pid: number, action: string) => (err: Error) => err instanceof ConflictError &&
    err.message.endsWith(`but its worker (pid ${pid}) is still finishing: ${action} once that has exited`);

  it('refuses a second --open-pr, which writes nothing of the run', () => whileHeld(async (dir, pid) => {
    await assert.rejects(openPrLater(dir, t.env, () => {}), refusal(pid, 'open its pull request'));
    return undefined;
  }));

  for (const mode of ['resume', 'verify'] as const) {
    it(`refuses a ${mode}, which writes nothing of the run and starts no worker`, () => whileHeld(async (dir, pid) => {
      let worker: ChildProcess | undefined;
      assert.throws(() => (worker = spawnWorker(readState(dir), mode, t.env, false)), refusal(pid, mode));
      return worker;
    }));
  }
});
