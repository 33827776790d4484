// A sandboxed run's gate listens before the agent and loads its forwarding in the turn after the agent's spawn
// (src/engine/worker.ts, src/gate/gate.ts): a load that fails closes the gate, stops the agent and fails the run.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareRun } from '../../src/engine/launch.ts';
import { readState } from '../../src/engine/run-state.ts';
import { which } from '../../src/spawn/svc-paths.ts';
import { processesMentioning, repoForTests, SLEEP_SCRIPT, workerRefusing } from './fixtures.ts';

describe("a sandboxed worker whose gate's forwarding cannot be loaded", () => {
  const t = repoForTests({ providers: { sleeper: SLEEP_SCRIPT } });

  it('stops its agent and fails the run, class infra, saying the egress gate could not load', async () => {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'sleeper', repo: t.repo,
      runId: null, env: t.env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    // The agent runs until stopped: only the failed load ends this run.
    const [code] = await once(workerRefusing('src/gate/forward.ts', dir, t.env), 'exit');
    assert.equal(code, 1);
    const final = readState(dir);
    assert.equal(final.status, 'failed');
    assert.equal(final.failure?.class, 'infra');
    assert.match(final.error ?? '', /^the run's egress gate could not load: .*a test refused the module/);
    assert.deepEqual(processesMentioning(`svc-grandchild-${state.run}`), [], 'nothing of the agent is left');
  });

  // The agent's sandbox failing to start is an infra failure the worker retries by itself; after the gate's own, it is
  // the stop the failed load asked for, and the run is the gate's failure, not stopped nor retried.
  it("fails the run as the gate's, not as stopped, when the agent's sandbox also fails to start", async () => {
    // A bwrap that fails every agent sandbox (only those carry --json-status-fd) and hands the rest to the real one.
    const fake = join(t.root, 'fake-bwrap');
    mkdirSync(fake, { recursive: true });
    writeFileSync(join(fake, 'bwrap'), `#!/bin/sh
case " $* " in *" --json-status-fd "*) echo "bwrap: Creating new namespace failed" >&2; exit 1;; esac
exec '${which('bwrap', t.env.PATH)}' "$@"
`);
    chmodSync(join(fake, 'bwrap'), 0o755);
    const env = { ...t.env, PATH: `${fake}:${t.env.PATH}`, SVC_INFRA_RETRY_WAIT_S: '0' };
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'sleeper', repo: t.repo,
      runId: null, env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    const [code] = await once(workerRefusing('src/gate/forward.ts', dir, env), 'exit');
    assert.equal(code, 1);
    const final = readState(dir);
    assert.deepEqual([final.status, final.failure?.class], ['failed', 'infra']);
    assert.match(final.error ?? '', /^the run's egress gate could not load: .*a test refused the module/);
  });
});
