// Taking a run (an --open-pr, a resume, a verify) checks that no live worker holds it and records itself as its
// worker, under the run's take lock (run-take.ts): two commands that read "no worker" at the same moment can no longer
// both take it. The race is real: two `svc start --open-pr` processes, each stopped by a barrier right at its own
// record (test/helpers/pause-take.ts), released only once both are there or gone.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { procStart } from '../../src/proc-stat.ts';
import { readState, writeState } from '../../src/engine/run-state.ts';
import { LockBlockedError, RunBeingTakenError, TAKE_LOCK, takeRun } from '../../src/engine/run-take.ts';
import { runFailure } from '../../src/run-json.ts';
import { idleNode } from '../helpers/run-child.ts';
import { CLI, repoForTests } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';

const PAUSE = new URL('../helpers/pause-take.ts', import.meta.url).pathname;
const RUN_TAKE = new URL('../../src/engine/run-take.ts', import.meta.url).pathname;

/** Resolves true once `child` said the line `word`, false if it ended without saying it. */
function says(child: ChildProcess, word: string): Promise<boolean> {
  return new Promise((resolve) => {
    let text = '';
    const heard = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (text.split('\n').includes(word)) done(true);
    };
    const closed = () => done(text.split('\n').includes(word));
    const done = (said: boolean) => {
      child.stdout!.off('data', heard);
      child.off('close', closed);
      resolve(said);
    };
    child.stdout!.on('data', heard);
    child.on('close', closed);
  });
}

describe('two svc commands taking one run at once', () => {
  const t = repoForTests({}, { SVC_SANDBOX: 'none' });
  let dir: string;
  let run: string;

  before(async () => {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: t.repo, runId: null,
      env: t.env,
    });
    run = state.run;
    dir = join(t.repo, '.svc', 'runs', run);
    // A failed --pr run whose PR was not opened, with no worker: what an --open-pr takes.
    writeState(dir, {
      ...state, pr: true, status: 'failed', ended_at: new Date().toISOString(),
      failure: runFailure('infra', 'the pull request could not be opened'), pid: null, pgid: null, proc_start: null,
    });
  });

  /** Two --open-pr of the run, each held at its record of itself until both are there (or refused): how many took
   * it, and what the others said. */
  async function race(): Promise<{ took: number; refusals: string[] }> {
    const racers = [0, 1].map(() => spawn(process.execPath, ['--import', PAUSE, CLI, 'start', '--open-pr', run],
      { cwd: t.repo, env: t.env, stdio: ['pipe', 'pipe', 'pipe'] }));
    const stderr = racers.map((r) => {
      let text = '';
      r.stderr!.setEncoding('utf8').on('data', (c: string) => (text += c));
      return () => text;
    });
    const ended = racers.map((r) => once(r, 'close'));
    try {
      const there = await Promise.all(racers.map((r) => says(r, 'at-take')));
      racers.forEach((r, i) => there[i] && r.stdin!.write('go\n'));
      const took = await Promise.all(racers.map((r, i) => there[i] ? says(r, 'took') : false));
      racers.forEach((r, i) => took[i] && r.stdin!.write('exit\n'));
      await Promise.all(ended);
      return { took: took.filter(Boolean).length, refusals: stderr.map((s) => s()).filter((s) => s !== '') };
    } finally {
      for (const r of racers) r.kill('SIGKILL');
    }
  }

  // Each round's owner exits still holding the take lock: the next round's two find it stale, and race to clear it.
  for (const round of [1, 2, 3]) {
    it(`leaves exactly one of two racing --open-pr the run's worker (round ${round})`, async () => {
      const { took, refusals } = await race();
      assert.equal(took, 1, `exactly one owner; the refused said: ${refusals.join(' | ')}`);
      assert.equal(refusals.length, 1);
      assert.match(refusals[0]!, /is being taken by another svc command|is still finishing/);
      assert.equal(readState(dir).status, 'failed');
    });
  }

  it('refuses an --open-pr as a conflict naming a folder at the take lock, which it leaves for a person', async () => {
    const lock = join(dir, TAKE_LOCK);
    rmSync(lock, { force: true });
    mkdirSync(lock);
    const before = readState(dir);
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--open-pr', run], { cwd: t.repo, env: t.env });
      assert.equal(res.code, 1, res.stderr);
      assert.equal(res.stderr, `svc start: Run ${run} cannot be taken: "${lock}" is a folder, which svc never makes ` +
        'there; remove it by hand, then try again\n');
      assert.ok(existsSync(lock), 'the folder is left as it was');
      assert.deepEqual(readState(dir), before, 'nothing took the run');
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  });
});

describe('the take lock', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-take-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a take while the lock\'s holder lives, and runs none of it', async () => {
    const holder = await idleNode();
    try {
      writeFileSync(join(dir, TAKE_LOCK), JSON.stringify({ pid: holder.pid, proc_start: procStart(holder.pid!) }));
      let ran = false;
      assert.throws(() => takeRun(dir, 'r1', () => (ran = true)), RunBeingTakenError);
      assert.equal(ran, false);
    } finally {
      holder.kill('SIGKILL');
      await once(holder, 'exit');
    }
  });

  it('takes over a lock whose holder is gone, even with its pid alive as another process', () => {
    // This very process's pid, with a start time it never had: the holder is gone, its pid is not.
    writeFileSync(join(dir, TAKE_LOCK), JSON.stringify({ pid: process.pid, proc_start: '1' }));
    assert.equal(takeRun(dir, 'r1', () => {
      const held = JSON.parse(readFileSync(join(dir, TAKE_LOCK), 'utf8')) as { pid: number };
      return held.pid;
    }), process.pid);
    assert.throws(() => readFileSync(join(dir, TAKE_LOCK)), { code: 'ENOENT' }, 'released after the take');
  });

  // Only root can hand a file to another user.
  const root = process.getuid?.() === 0 ? false : 'only root can plant a file as another user';
  it('takes over a lock another user planted, though it names a live svc process', { skip: root }, async () => {
    const holder = await idleNode();
    try {
      const path = join(dir, TAKE_LOCK);
      writeFileSync(path, JSON.stringify({ pid: holder.pid, proc_start: procStart(holder.pid!) }));
      chownSync(path, 65534, 65534);
      assert.equal(takeRun(dir, 'r1', () => 'took'), 'took');
    } finally {
      holder.kill('SIGKILL');
      await once(holder, 'exit');
    }
  });

  it('takes over a FIFO planted as the lock rather than wait on it for a writer', () => {
    rmSync(join(dir, TAKE_LOCK), { force: true });
    assert.equal(spawnSync('mkfifo', [join(dir, TAKE_LOCK)]).status, 0);
    // In a child: a take blocked on the FIFO's open would hold this process's one thread for good. The timeout only
    // ends such a child; what is asserted is what it said.
    const script = `import { takeRun } from ${JSON.stringify(RUN_TAKE)};\n` +
      `process.stdout.write(takeRun(${JSON.stringify(dir)}, 'r1', () => 'took'));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script],
      { encoding: 'utf8', timeout: 30_000 });
    assert.equal(child.stdout, 'took', `the take ended with ${child.signal ?? child.status}: ${child.stderr}`);
    assert.throws(() => readFileSync(join(dir, TAKE_LOCK)), { code: 'ENOENT' }, 'released after the take');
  });

  it('refuses a take with a LockBlockedError naming a folder at the lock or its guard, and runs none of it', () => {
    for (const name of [TAKE_LOCK, `${TAKE_LOCK}.clearing`]) {
      rmSync(join(dir, TAKE_LOCK), { recursive: true, force: true });
      // A guard needs a stale lock to be asked for at all.
      const stale = JSON.stringify({ pid: process.pid, proc_start: '1' });
      if (name !== TAKE_LOCK) writeFileSync(join(dir, TAKE_LOCK), stale);
      mkdirSync(join(dir, name));
      let ran = false;
      assert.throws(() => takeRun(dir, 'r1', () => (ran = true)), (err: unknown) => {
        assert.ok(err instanceof LockBlockedError && err instanceof RunBeingTakenError);
        assert.equal(err.code, 'conflict');
        assert.equal(err.message, `Run r1 cannot be taken: "${join(dir, name)}" is a folder, which svc never makes ` +
          'there; remove it by hand, then try again');
        return true;
      });
      assert.equal(ran, false);
      rmSync(join(dir, name), { recursive: true });
    }
    rmSync(join(dir, TAKE_LOCK), { force: true });
  });

  it('takes over a socket or a link planted as the lock, never touching what the link points at', async () => {
    const server = createServer();
    await new Promise<void>((done) => server.listen(join(dir, TAKE_LOCK), done));
    try {
      assert.equal(takeRun(dir, 'r1', () => 'took'), 'took');
    } finally {
      await new Promise((done) => server.close(done));
    }
    const target = join(dir, 'pointed-at');
    mkdirSync(target);
    symlinkSync(target, join(dir, TAKE_LOCK));
    assert.equal(takeRun(dir, 'r1', () => 'took'), 'took');
    assert.ok(existsSync(target), 'the link\'s target is left');
    assert.throws(() => readFileSync(join(dir, TAKE_LOCK)), { code: 'ENOENT' }, 'released after the take');
    rmSync(target, { recursive: true });
  });

  it('removes the temp files a killed taker left, only those of a pid that is gone', () => {
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const dead = Number(gone.stdout);
    assert.ok(dead > 0);
    const deadTemps = [`${TAKE_LOCK}.${dead}.0badf00d.tmp`, `${TAKE_LOCK}.clearing.${dead}.01234567.tmp`,
      `ship.hold.${dead}.89abcdef.tmp`];
    const outside = join(mkdtempSync(join(tmpdir(), 'svc-take-outside-')), 'file');
    writeFileSync(outside, 'kept');
    // A live pid's (this process's), names not of svc's pattern, a link and a folder of the pattern: all kept.
    const kept = [`${TAKE_LOCK}.${process.pid}.deadbeef.tmp`, `${TAKE_LOCK}.${dead}.0badf00d.tmp.bak`,
      `${TAKE_LOCK}.${dead}.0BADF00D.tmp`, `other.${dead}.0badf00d.tmp`];
    for (const name of [...deadTemps, ...kept]) writeFileSync(join(dir, name), '{}');
    symlinkSync(outside, join(dir, `${TAKE_LOCK}.${dead}.11111111.tmp`));
    mkdirSync(join(dir, `${TAKE_LOCK}.${dead}.22222222.tmp`));
    try {
      assert.equal(takeRun(dir, 'r1', () => 'took'), 'took');
      const left = readdirSync(dir).sort();
      const planted = [`${TAKE_LOCK}.${dead}.11111111.tmp`, `${TAKE_LOCK}.${dead}.22222222.tmp`];
      assert.deepEqual(left, [...kept, ...planted].sort());
      assert.equal(readFileSync(outside, 'utf8'), 'kept');
    } finally {
      for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
      rmSync(join(outside, '..'), { recursive: true, force: true });
    }
  });
});

// A new run's worker is recorded without the take lock (launch.ts spawnWorker). The one other command that writes a
// queued run is a later start's rename of the checkout's runs (checkout-claim.ts): here one held right at its write,
// having read the new run before its worker was recorded, while the new run's worker starts.
describe('a new run between its making and its worker\'s record', () => {
  const t = repoForTests({}, { SVC_SANDBOX: 'none' });

  it('keeps its worker\'s record when another start renames the checkout\'s runs meanwhile', async () => {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: t.repo, runId: null,
      env: t.env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    // The checkout's name changes: the next start renames its runs, the new one's too unless it leaves it.
    spawnSync('git', ['remote', 'set-url', 'origin', join(t.root, 'acme', 'renamed.git')], { cwd: t.repo });
    const other = spawn(process.execPath, ['--import', PAUSE, CLI, 'start', '--worktree', '--provider', 'fake',
      'another change'], { cwd: t.repo, env: t.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let worker: ReturnType<typeof spawnWorker> | null = null;
    try {
      assert.ok(await says(other, 'at-take'), 'the other start reached its first write of a state');
      worker = spawnWorker(readState(dir), 'start', t.env, false);
      assert.ok(worker.pid);
      // Held where it is: whatever the worker itself writes later cannot hide what the other start wrote.
      process.kill(worker.pid, 'SIGSTOP');
      other.stdin!.write('go\n');
      assert.ok(await says(other, 'took'));
      assert.equal(readState(dir).pid, worker.pid, 'the new run still names its worker');
    } finally {
      other.kill('SIGKILL');
      if (worker?.pid) {
        process.kill(worker.pid, 'SIGKILL');
        await once(worker, 'exit');
      }
    }
  });
});
