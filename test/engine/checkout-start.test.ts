// A run without a worktree works in the user's own checkout: it must sign only what it changed, never files that were
// there before it started, and a second such run in the same checkout must not rewrite the first one's files.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, processesEnded, readJson, CLI, GIT_ENV, EDIT_SCRIPT, type TestRepo } from './fixtures.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { procStart } from '../../src/proc-stat.ts';
import { waitFor } from '../helpers/wait-for.ts';

/** Waits for its release file, then edits a.txt: a run that holds the checkout as long as the test wants. */
const HOLD_SCRIPT = `#!/bin/sh
cat > /dev/null
while [ ! -f "$HOME/agent-state/release" ]; do sleep 0.05; done
echo "held" >> a.txt
`;

describe('a run without a worktree', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, hold: HOLD_SCRIPT } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}` };
  });
  after(() => repo.cleanup());

  function svc(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
  }
  const runFile = (run: string, name: string) => join(repo.repo, '.svc', 'runs', run, name);

  it('diffs and signs only what it changed, and names the files that were already there', async () => {
    writeFileSync(join(repo.repo, 'notes-before.txt'), 'PRIVATE-NOTES\n');
    writeFileSync(join(repo.repo, 'a.txt'), 'hello\nuncommitted line\n');
    const res = await svc(['start', '--brief', 'append fixed', '--provider', 'fake', '--detach']);
    assert.equal(res.status, 0, res.stderr);
    const { run } = JSON.parse(res.stdout.trim());
    await waitFor(() => ['succeeded', 'failed'].includes(readJson(runFile(run, 'state.json')).status), 'the run to end');
    const patch = readFileSync(runFile(run, 'artifacts/diff.patch'), 'utf8');
    assert.match(patch, /^\+fixed$/m);
    assert.doesNotMatch(patch, /PRIVATE-NOTES|^\+uncommitted line|notes-before|config\.json/m);
    const stat = readJson(runFile(run, 'artifacts/diffstat.json'));
    assert.deepEqual(stat.files.map((f: { path: string }) => f.path), ['a.txt']);
    assert.equal(stat.insertions, 1);
    const receipt = readJson(runFile(run, 'artifacts/receipt.json'));
    assert.doesNotMatch(JSON.stringify(receipt), /notes-before/);
    const events = readFileSync(runFile(run, 'events.jsonl'), 'utf8');
    assert.match(events, /uncommitted or untracked file\(s\) at the start/);
  });

  it('refuses a second run in the same checkout while the first works, pointing to --worktree and a local stop',
    async () => {
    const release = join(repo.home, 'agent-state', 'release');
    try {
      const first = await svc(['start', '--brief', 'hold the checkout', '--provider', 'hold', '--detach']);
      assert.equal(first.status, 0, first.stderr);
      const { run } = JSON.parse(first.stdout.trim());
      await waitFor(() => readJson(runFile(run, 'state.json')).status === 'running', 'the first run to start');
      const second = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
      assert.notEqual(second.status, 0);
      assert.match(second.stderr, new RegExp(`${run}.*--worktree`, 's'));
      // The stop it names works here without a Control Plane (this test has none).
      assert.match(second.stderr, new RegExp(`\\(svc start --stop ${run} ends it now\\)`));
      const isolated = await svc(['start', '--brief', 'append fixed', '--provider', 'fake', '--worktree', '--detach']);
      assert.equal(isolated.status, 0, isolated.stderr);
      writeFileSync(release, '');
      await waitFor(() => readJson(runFile(run, 'state.json')).status === 'succeeded', 'the first run to end');
      const after = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
      assert.equal(after.status, 0, after.stderr);
    } finally {
      // Whatever failed above, the held agent is let go and every detached worker this test started has ended:
      // none outlives the test to write into the next one's checkout or keep the test process waiting.
      writeFileSync(release, '');
      await processesEnded(repo.root);
    }
  });

  it('refuses a second run beside a day-old run resumed a moment ago whose worker is not recorded yet', async () => {
    const made = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(made.status, 0, made.stderr);
    const { run } = JSON.parse(made.stdout.split('\n')[0]!);
    // Its worker's last write is over before the test writes the run's state.
    await waitFor(() => procStart(readJson(runFile(run, 'state.json')).pid) === null, 'its worker to exit');
    const ended = readJson(runFile(run, 'state.json'));
    // As a resume's launcher leaves it between queueing the run again and recording the worker it starts.
    const resumed = {
      ...ended, status: 'queued', ended_at: null, pid: null, pgid: null, proc_start: null,
      started_at: new Date(Date.now() - 86_400_000).toISOString(), updated_at: new Date().toISOString(),
    };
    writeFileSync(runFile(run, 'state.json'), JSON.stringify(resumed));
    try {
      const second = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
      assert.notEqual(second.status, 0, second.stdout);
      assert.match(second.stderr, new RegExp(`${run}.*--worktree`, 's'));
    } finally {
      writeFileSync(runFile(run, 'state.json'), JSON.stringify(ended));
    }
  });

  it('does not keep the checkout for a run without a worker whose state names no valid time of its last write',
    async () => {
    const made = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(made.status, 0, made.stderr);
    const { run } = JSON.parse(made.stdout.split('\n')[0]!);
    await waitFor(() => procStart(readJson(runFile(run, 'state.json')).pid) === null, 'its worker to exit');
    const ended = readJson(runFile(run, 'state.json'));
    // Not a state svc wrote: nothing says a worker is coming, so it must not hold the checkout for ever.
    const timeless = { ...ended, status: 'queued', ended_at: null, pid: null, pgid: null, proc_start: null };
    try {
      for (const updated of [{ updated_at: 'not a time' }, { updated_at: undefined }]) {
        writeFileSync(runFile(run, 'state.json'), JSON.stringify({ ...timeless, ...updated }));
        const second = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
        assert.equal(second.status, 0, second.stderr);
      }
    } finally {
      writeFileSync(runFile(run, 'state.json'), JSON.stringify(ended));
    }
  });

  it('refuses to resume a run in the checkout while another run works there, and resumes it once that one ended',
    async () => {
    const release = join(repo.home, 'agent-state', 'release');
    rmSync(release, { force: true });
    const startHeld = async (brief: string) => {
      const res = await svc(['start', '--brief', brief, '--provider', 'hold', '--detach']);
      assert.equal(res.status, 0, res.stderr);
      const { run } = JSON.parse(res.stdout.split('\n')[0]!);
      await waitFor(() => readJson(runFile(run, 'state.json')).status === 'running', 'the run to start');
      return run as string;
    };
    const stopped = await startHeld('stopped then resumed');
    assert.equal((await svc(['start', '--stop', stopped])).status, 0);
    const again = await svc(['start', '--stop', stopped]);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, new RegExp(`run ${stopped} had already ended \\(stopped\\): nothing to stop`));
    const working = await startHeld('works meanwhile');
    const refused = await svc(['start', '--resume', stopped, '--detach']);
    assert.notEqual(refused.status, 0, refused.stdout);
    assert.match(refused.stderr,
      new RegExp(`Run ${working} is already working.*wait for run ${working} to end, then resume`, 's'));
    assert.doesNotMatch(refused.stderr, /--worktree/);
    assert.equal(readJson(runFile(stopped, 'state.json')).status, 'stopped');
    writeFileSync(release, '');
    await waitFor(() => readJson(runFile(working, 'state.json')).status === 'succeeded', 'the working run to end');
    rmSync(release);
    // Two resumes at once: one resumes it, the other finds it no longer stopped (not the run in its own way).
    const both = await Promise.all([svc(['start', '--resume', stopped, '--detach']),
      svc(['start', '--resume', stopped, '--detach'])]);
    assert.deepEqual(both.map((r) => r.status).sort(), [0, 1], both.map((r) => r.stderr).join('\n'));
    const loser = both.find((r) => r.status !== 0)!;
    assert.match(loser.stderr,
      new RegExp(`Run ${stopped} is (queued|running); only stopped or failed runs can be resumed`));
    await waitFor(() => readJson(runFile(stopped, 'state.json')).status === 'running', 'the resumed run to work');
    writeFileSync(release, '');
    await waitFor(() => readJson(runFile(stopped, 'state.json')).status === 'succeeded', 'the resumed run to end');
    rmSync(release);
  });

  it('gives the checkout to only one of two starts made at the same moment', async () => {
    const release = join(repo.home, 'agent-state', 'release');
    rmSync(release, { force: true });
    // Untracked files make each start's look at the checkout slow: the moment two starts both found it free.
    const many = join(repo.repo, 'many');
    mkdirSync(many);
    for (let i = 0; i < 2000; i += 1) writeFileSync(join(many, `f${i}.txt`), `${i}\n`);
    for (let round = 0; round < 3; round += 1) {
      const hold = ['start', '--brief', 'hold', '--provider', 'hold', '--detach'];
      const both = await Promise.all([svc(hold), svc(hold)]);
      const started = both.filter((res) => res.status === 0);
      assert.equal(started.length, 1, `round ${round}: ${both.map((res) => res.stdout + res.stderr).join('\n')}`);
      const { run } = JSON.parse(started[0]!.stdout.trim());
      assert.match(both.find((res) => res.status !== 0)!.stderr, new RegExp(`${run}.*--worktree`, 's'));
      writeFileSync(release, '');
      await waitFor(() => readJson(runFile(run, 'state.json')).status === 'succeeded', 'the run to end');
      rmSync(release);
    }
    rmSync(many, { recursive: true });
  });

  it('takes over a claim whose launcher died holding it, and leaves no claim folder behind', async () => {
    const dead = spawnSync('true').pid;
    const claim = join(repo.repo, '.git', 'svc-checkout-claim');
    mkdirSync(claim);
    writeFileSync(join(claim, 'owner'), JSON.stringify({ pid: dead, pgid: dead, proc_start: '1' }));
    // A launcher killed while it waited left its own folder.
    mkdirSync(join(repo.repo, '.git', `svc-checkout-claim-${dead}-0123456789ab`));
    const res = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(res.status, 0, res.stderr);
    assert.deepEqual(readdirSync(join(repo.repo, '.git')).filter((name) => name.startsWith('svc-checkout-claim')), []);
  });

  it('ignores a claim the repository commits at .svc/runs/.checkout and changes no tracked file', async () => {
    const committed = join(repo.repo, '.svc', 'runs', '.checkout');
    mkdirSync(committed);
    const owner = JSON.stringify({ pid: 1, pgid: 1, proc_start: procStart(1) });
    writeFileSync(join(committed, 'owner'), owner);
    const git = (args: string[]) => spawnSync('git', args, { cwd: repo.repo, env, encoding: 'utf8' });
    assert.equal(git(['add', '-f', '.svc/runs/.checkout/owner']).status, 0);
    assert.equal(git(['commit', '-q', '-m', 'a claim']).status, 0);
    const res = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(res.status, 0, res.stderr);
    assert.equal(readFileSync(join(committed, 'owner'), 'utf8'), owner);
    assert.equal(git(['status', '--porcelain', '--', '.svc/runs']).stdout, '');
  });
});
