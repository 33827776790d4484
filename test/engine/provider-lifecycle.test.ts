// What real agent CLIs showed about a provider's life: tools started in process groups of their own must die with a
// stopped run, and an answer that arrives before the asking provider exits must still reach it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoForTests, readJson, processesEnded, processesMentioning, CLI, AGENT_STATE } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

/** Starts its long "tool" with setsid, in a session and group of its own, as gemini starts its shell commands. */
const DETACHED_TOOL = `#!/bin/sh
cat > /dev/null
setsid sh -c 'echo up > "$0"; while :; do sleep 1; done' "$HOME/agent-state/$SVC_RUN_ID.tool" &
wait
`;

/** Asks, then stays up until the answer is written (without reading it), then exits: the answer arrives before exit. */
const ASK_LATE_EXIT = `#!/bin/sh
cat > /dev/null
if grep -q "Answer 1 from the operator" "$SVC_TASK_FILE"; then
  grep -A2 "Answer 1 from the operator" "$SVC_TASK_FILE" | tail -1 >> a.txt
  exit 0
fi
echo "Which word?" > "$SVC_QUESTION_FILE"
while [ ! -f "$SVC_ANSWER_FILE" ]; do sleep 0.05; done
`;

describe('provider lifecycle', () => {
  const repo = repoForTests({ providers: { detached: DETACHED_TOOL, late: ASK_LATE_EXIT } });

  const svc = (args: string[]) => {
    const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
    return runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env: repo.env, stdio });
  };
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));

  it('stopping a run ends a tool the provider started in a process group of its own', async () => {
    const start = await svc(['start', '--brief', 'long job', '--detach', '--worktree', '--provider', 'detached']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout.trim());
    const toolFile = join(repo.home, AGENT_STATE, `${run}.tool`);
    await waitFor(() => existsSync(toolFile) || null, 'the tool to start');
    assert.ok(processesMentioning(toolFile).length >= 1, 'the setsid tool runs');
    const stop = await svc(['start', '--stop', run]);
    assert.equal(stop.code, 0, stop.stderr);
    await waitFor(() => (state(run).status === 'stopped' ? true : null), 'the run to stop');
    await waitFor(() => processesMentioning(toolFile).length === 0 || null, 'the detached tool to be gone');
    // Its worker goes on past the stop (its last writes): a folder removed under it is left half there.
    await processesEnded(repo.root);
  });

  it('re-invokes a provider that exits with the answer unread in $SVC_ANSWER_FILE', async () => {
    const start = await svc(['start', '--brief', 'ask', '--detach', '--worktree', '--provider', 'late']);
    assert.equal(start.code, 0, start.stderr);
    const { run } = JSON.parse(start.stdout.trim());
    await waitFor(() => (state(run).status === 'blocked' ? true : null), 'the run to block');
    const answer = await svc(['answer', `local/${run}`, 'forty-two']);
    assert.equal(answer.code, 0, answer.stderr);
    const finished = () => (['succeeded', 'failed'].includes(state(run).status) ? state(run) : null);
    const done = await waitFor(finished, 'the run to finish');
    assert.equal(done.status, 'succeeded', done.error);
    assert.match(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), /forty-two/);
    await processesEnded(repo.root);
  });
});
