// A resume or a verify of an ended run starts only once the worker of its last attempt, and the last verify's, have
// exited: a worker's status ends before it does, and its last write (no pid) puts back its own copy of
// state.json (launch.ts afterLastWorker).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, FAILS_ONCE, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

// Stands in for a worker between its run's end and its last write, with a worker's argv (`node <cli> worker …
// --run-id RUN`): loaded first, it ends the process itself, so svc never runs. Once its stdin closes it keeps
// state.json as it is then, watches it for 3 s, puts its copy back without a pid as worker.ts does, and says whether
// another process wrote the file meanwhile. Without stdin to wait for (STAND_IN_FOREVER) it stays until killed.
const FINISHING_WORKER = `
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
const path = process.env.STAND_IN_STATE;
if (process.env.STAND_IN_FOREVER) await new Promise(() => setInterval(() => {}, 1000));
await new Promise((resolve) => {
  process.stdin.resume();
  process.stdin.on('end', resolve);
});
const kept = readFileSync(path, 'utf8');
const until = Date.now() + 3000;
let now = kept;
while (now === kept && Date.now() < until) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  now = readFileSync(path, 'utf8');
}
// Written aside and renamed into place, as writeState does: svc polls the file meanwhile and must never read it
// half-written.
writeFileSync(path + '.tmp', JSON.stringify({ ...JSON.parse(kept), pid: null, proc_start: null }));
renameSync(path + '.tmp', path);
process.stdout.write(now === kept ? 'untouched' : 'written meanwhile');
process.exit(0);
`;

describe('svc start --resume of a run whose worker is still finishing', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  before(() => {
    repo = makeRepo({ providers: { 'fails-once': FAILS_ONCE } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      SVC_SANDBOX: 'none' };
  });
  after(() => repo.cleanup());

  const svc = (args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });
  const standIn = (run: string, path: string, forever = false) => spawn(process.execPath, [
    '--import', `data:text/javascript,${encodeURIComponent(FINISHING_WORKER)}`,
    CLI, 'worker', 'start', '--run-id', run, '--repo', repo.repo,
  ], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...env, STAND_IN_STATE: path, STAND_IN_FOREVER: forever ? '1' : '' },
  });

  /** A run that failed, its worker gone. */
  async function failedRun(): Promise<{ run: string; path: string; failed: Record<string, unknown> }> {
    const started = await svc(['start', '--brief', 'fix', '--worktree', '--detach', '--provider', 'fails-once']);
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    const failed = await waitFor(() => {
      const s = readJson(path);
      return s.status === 'failed' && s.pid === null ? s : null;
    }, 'the run to fail and its worker to go');
    return { run, path, failed };
  }

  it('waits for that worker to exit before it queues the run again, then resumes it', async () => {
    const { run, path, failed } = await failedRun();
    // The run as its worker left it at its end, that worker still there.
    const worker = standIn(run, path);
    let said = '';
    worker.stdout!.setEncoding('utf8').on('data', (text: string) => (said += text));
    // What it said is all read once its pipes closed: its exit may be seen first.
    const closed = once(worker, 'close');
    writeFileSync(path, JSON.stringify({ ...failed, pid: worker.pid, proc_start: null }));
    worker.stdin!.end();
    const resumed = await svc(['start', '--resume', run, '--detach']);
    assert.equal(resumed.code, 0, resumed.stderr);
    await closed;
    assert.equal(said, 'untouched', 'nothing wrote state.json while the run\'s worker was still there');
    const ended = await waitFor(() => {
      const s = readJson(path);
      return s.status === 'succeeded' || s.status === 'failed' ? s : null;
    }, 'the resumed run to end');
    assert.equal(ended.status, 'succeeded', ended.error);
  });

  it('refuses a run it could not resume at once, its worker still there or not', async () => {
    const { run, path, failed } = await failedRun();
    const worker = standIn(run, path, true);
    try {
      writeFileSync(path, JSON.stringify({ ...failed, status: 'succeeded', pid: worker.pid, proc_start: null }));
      const resumed = await svc(['start', '--resume', run, '--detach']);
      // No wait for a worker the refusal does not depend on: this worker never exits, so a resume that waited for it
      // would be refused for it, naming its pid, instead.
      assert.equal(resumed.stderr, `svc start: Run ${run} is succeeded; only stopped or failed runs can be resumed\n`);
    } finally {
      worker.kill('SIGKILL');
    }
  });

  it('names the pid of a worker still there after the wait', async () => {
    const { run, path, failed } = await failedRun();
    const worker = standIn(run, path, true);
    try {
      writeFileSync(path, JSON.stringify({ ...failed, pid: worker.pid, proc_start: null }));
      const resumed = await svc(['start', '--resume', run, '--detach']);
      assert.notEqual(resumed.code, 0);
      assert.match(resumed.stderr, new RegExp(`its worker \\(pid ${worker.pid}\\) is still finishing`));
    } finally {
      worker.kill('SIGKILL');
    }
  });

  it('takes a pid without a start time for the worker only while that process is a worker of the run', async () => {
    const { run, path, failed } = await failedRun();
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      writeFileSync(path, JSON.stringify({ ...failed, pid: other.pid, proc_start: null }));
      const resumed = await svc(['start', '--resume', run, '--detach']);
      // An unrelated process is no worker to wait for: this one outlives the wait, so taken for the worker it would
      // have had the resume refused.
      assert.equal(resumed.code, 0, resumed.stderr);
      const ended = await waitFor(() => {
        const s = readJson(path);
        return s.status === 'succeeded' || s.status === 'failed' ? s : null;
      }, 'the resumed run to end');
      assert.equal(ended.status, 'succeeded', ended.error);
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe('svc start --verify: a resume or another verify waits for its worker', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let marks: string;
  before(() => {
    repo = makeRepo({ providers: { 'fails-once': FAILS_ONCE } });
    marks = join(repo.root, 'checks.log');
    writeFileSync(marks, '');
    // The check takes 2 s and says when it ended: a command that waited for a verify's worker returns after its end.
    const check = ['sh', '-c', `sleep 2; echo end >> '${marks}'; grep -q fixed a.txt`];
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ checks: [{ name: 'slow', run: check }] }));
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      SVC_SANDBOX: 'none' };
  });
  after(() => repo.cleanup());

  const svc = (args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });
  const ends = () => readFileSync(marks, 'utf8').split('\n').filter((line) => line === 'end').length;

  it('starts a second verify, then a resume, only once the verify before has exited', async () => {
    const started = await svc(['start', '--brief', 'fix', '--worktree', '--detach', '--provider', 'fails-once']);
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    await waitFor(() => {
      const s = readJson(path);
      return s.status === 'failed' && s.pid === null ? s : null;
    }, 'the run to fail and its worker to go');
    const before = ends();
    // Each command after the first returns once the verify before it ended its check.
    for (const [waited, flag] of ['--verify', '--verify', '--resume'].entries()) {
      const res = await svc(['start', flag, run, '--detach']);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(ends(), before + waited, `${flag} after ${waited} verify(s) waited for them`);
    }
    const ended = await waitFor(() => {
      const s = readJson(path);
      return s.status === 'succeeded' || s.status === 'failed' ? s : null;
    }, 'the resumed run to end');
    assert.equal(ended.status, 'succeeded', ended.error);
  });
});
