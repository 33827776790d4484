// An agent asks by writing $SVC_QUESTION_FILE. A shell's `>` creates the file before it writes: svc must not take the
// empty file it may see in between as a question without words. Nor may what the agent leaves at either file's name
// (a FIFO, a folder) stop svc or fail the run as svc's.
import { describe, it, before, after, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs, { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, processesEnded, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { AgentFolderError, clearAgentName, replaceAgentFile } from '../../src/engine/safe-fs.ts';

/** Opens the question file, writes it a moment later and exits; invoked again with the answer, writes it down. */
const SLOW_ASK = `#!/bin/sh
cat > /dev/null
if grep -q "Answer 1 from the operator" "$SVC_TASK_FILE"; then
  grep -A2 "Answer 1 from the operator" "$SVC_TASK_FILE" | tail -1 >> a.txt
  exit 0
fi
: > "$SVC_QUESTION_FILE"
sleep 1
echo "Which colour should a.txt name?" > "$SVC_QUESTION_FILE"
`;

describe('a question file written in two steps', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: { slow: SLOW_ASK } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  });
  after(async () => {
    await processesEnded(repo.root);
    repo.cleanup();
  });

  it('blocks with the words the agent wrote, and goes on with the answer', async () => {
    const child = spawn(process.execPath, [CLI, 'start', '--brief', 'ask slowly', '--provider', 'slow', '--detach'],
      { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await new Promise((resolve) => child.on('close', resolve));
    const { run } = JSON.parse(out.trim().split('\n')[0]!) as { run: string };
    const state = () => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    const blocked = await waitFor(() => (state().status === 'blocked' ? state() : null), 'the run to block');
    assert.equal(blocked.question, 'Which colour should a.txt name?');
    const answered = await runChild(process.execPath, [CLI, 'answer', `local/${run}`, 'teal'], { cwd: repo.repo, env });
    assert.equal(answered.code, 0, answered.stderr);
    const done = await waitFor(() => (['succeeded', 'failed'].includes(state().status) ? state() : null), 'the end');
    assert.equal(done.status, 'succeeded', done.error);
  });
});

/** Asks, leaving a FIFO where svc puts its answer (or, by its brief, folders where svc puts the answer and takes the
 * question); once invoked again with the answer in $SVC_ANSWER_FILE, writes it down. */
const BLOCKS_ITS_FILES = `#!/bin/sh
cat > /dev/null
if [ -f "$SVC_ANSWER_FILE" ]; then cat "$SVC_ANSWER_FILE" >> a.txt; exit 0; fi
if grep -qi fifo "$SVC_TASK_FILE"; then
  mkfifo "$SVC_ANSWER_FILE"
  echo "Which colour?" > "$SVC_QUESTION_FILE"
else
  mkdir "$SVC_ANSWER_FILE" "$SVC_QUESTION_FILE"
fi
`;

/** Fills the folder of its question file, as it could the worktree. */
const FILLS_ASK_FOLDER = `#!/bin/sh
cat > /dev/null
dir=$(dirname "$SVC_QUESTION_FILE")
for i in $(seq 1 40); do head -c 1048576 /dev/zero > "$dir/fill-$i.bin"; done
sleep 30
`;

describe('what an agent leaves where its question and answer go', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  const workers: Array<{ pid: number; run: string }> = [];

  before(() => {
    repo = makeRepo({ providers: { blocks: BLOCKS_ITS_FILES, fills: FILLS_ASK_FOLDER } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  });
  after(async () => {
    // A worker the old code left waiting on the FIFO for ever (SIGTERM does not end it), while it is still that one.
    for (const { pid, run } of workers) {
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(run)) process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await processesEnded(repo.root);
    repo.cleanup();
  });

  const asked = {
    'a FIFO where its answer goes': 'Which colour?',
    'folders where its question and answer go': 'The provider asked for input without saying what',
  };
  for (const [kind, question] of Object.entries(asked)) {
    it(`answers an agent that left ${kind}, never opening what it left`, async () => {
      const started = await runChild(process.execPath,
        [CLI, 'start', '--brief', `leave ${kind}`, '--provider', 'blocks', '--detach', '--worktree'],
        { cwd: repo.repo, env });
      assert.equal(started.code, 0, started.stderr);
      const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
      const state = () => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
      const blocked = await waitFor(() => (state().status === 'blocked' ? state() : null), 'the run to block');
      workers.push({ pid: blocked.pid, run });
      assert.equal(blocked.question, question);
      const answered = await runChild(process.execPath, [CLI, 'answer', `local/${run}`, 'teal'],
        { cwd: repo.repo, env });
      assert.equal(answered.code, 0, answered.stderr);
      const done = await waitFor(() => (['succeeded', 'failed'].includes(state().status) ? state() : null), 'the end',
        20_000);
      assert.equal(done.status, 'succeeded', done.error);
      const tree = join(repo.repo, '.svc', 'worktrees', run);
      assert.match(readFileSync(join(tree, 'a.txt'), 'utf8'), /teal/);
    });
  }

  it('ends an agent whose question folder grows past limits.disk_mb, as its worktree would', async () => {
    const policy = join(repo.repo, '.svc', 'policy.json');
    writeFileSync(policy, JSON.stringify({ limits: { disk_mb: 8 } }));
    try {
      const started = await runChild(process.execPath,
        [CLI, 'start', '--brief', 'fill', '--provider', 'fills', '--worktree'], { cwd: repo.repo, env });
      const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
      const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
      assert.equal(state.status, 'failed');
      assert.match(state.error, /grew by more than 8 MiB.*limits\.disk_mb/);
    } finally {
      rmSync(policy, { force: true });
    }
  });
});

// The agent runs while svc clears and replaces its answer file: it may remove, swap or re-create what is there at any
// moment between svc's steps (each step is made to race here by a stand-in for renameSync).
describe('clearing and replacing a name the running agent writes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-agent-name-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const realRename = fs.renameSync;

  /** renameSync doing `agent(from, to)` first whenever `when(from, to)`. */
  function racing(t: TestContext, when: (from: string, to: string) => boolean, agent: () => void) {
    t.mock.method(fs, 'renameSync', (from: string, to: string) => {
      if (when(from, to)) agent();
      realRename(from, to);
    });
    syncBuiltinESMExports();
    t.after(() => {
      t.mock.restoreAll();
      syncBuiltinESMExports();
    });
  }

  const agentActs = {
    'removed': (aside: string) => rmSync(aside),
    'made a folder at': (aside: string) => {
      rmSync(aside);
      mkdirSync(aside);
    },
  };
  for (const [act, agent] of Object.entries(agentActs)) {
    it(`takes a name as cleared when the agent ${act} the entry svc moved aside`, (t) => {
      const path = join(dir, `question-${act.length}.txt`);
      writeFileSync(path, 'Which colour?');
      // The agent acts once the entry is under svc's name (after the real rename).
      t.mock.method(fs, 'renameSync', (from: string, to: string) => {
        realRename(from, to);
        if (from === path) agent(to);
      });
      syncBuiltinESMExports();
      try {
        clearAgentName(path);
      } finally {
        t.mock.restoreAll();
        syncBuiltinESMExports();
      }
      assert.equal(existsSync(path), false);
    });
  }

  it('replaces the answer file when the agent makes a folder there once, and fails as the agent once it keeps on',
    (t) => {
      const path = join(dir, 'answer.txt');
      let folders = 0;
      racing(t, (from, to) => to === path && from.endsWith('.tmp') && folders < 1, () => {
        folders++;
        mkdirSync(path);
      });
      replaceAgentFile(path, 'teal\n');
      assert.equal(readFileSync(path, 'utf8'), 'teal\n');
      t.mock.restoreAll();
      racing(t, (from, to) => to === path && from.endsWith('.tmp'), () => mkdirSync(path));
      assert.throws(() => replaceAgentFile(path, 'teal\n'), (err: unknown) => {
        assert.ok(err instanceof AgentFolderError, String(err));
        assert.match(err.message, /kept making a folder at .*answer\.txt/);
        return true;
      });
    });
});
