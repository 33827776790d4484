// One repository, one name: a checkout that gains an origin would list its earlier runs under its
// folder name and its later runs under owner/name. The first run under the new name renames the earlier ones, ships
// them, and says so; their receipts keep the name they were signed with.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, CLI, EDIT_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { idleNode, runChild } from '../helpers/run-child.ts';
import { procStart } from '../../src/proc-stat.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

/** A process with a worker's command line for `run` of project `repo` (launch.ts spawnWorker), idle until killed. */
function workerStandIn(run: string, repo: string) {
  return idleNode([CLI, 'worker', 'start', '--run-id', run, '--repo', repo]);
}

/** A checkout with no origin (so its folder, `work`, names it), a Control Plane, and `svc start` in it. */
function checkoutWithoutOrigin() {
  const t = {
    repo: undefined as unknown as TestRepo, cp: undefined as unknown as TestControl, env: {} as NodeJS.ProcessEnv,
  };
  before(async () => {
    t.repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    execFileSync('git', ['remote', 'remove', 'origin'], { cwd: t.repo.repo });
    t.cp = await startTestControl();
    t.env = { ...process.env, ...GIT_ENV, HOME: t.repo.home, SVC_CONTROL_URL: t.cp.url, SVC_SANDBOX: 'none' };
  });
  after(async () => {
    await t.cp.close();
    t.repo.cleanup();
  });
  async function start(brief: string, ...flags: string[]): Promise<{ run: string; stderr: string }> {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', brief, '--provider', 'fake', ...flags],
      { cwd: t.repo.repo, env: t.env });
    assert.equal(res.code, 0, res.stderr);
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    return { run, stderr: res.stderr };
  }
  return { t, start };
}

describe('a checkout that gains an origin', () => {
  const { t, start } = checkoutWithoutOrigin();

  async function listed(run: string): Promise<unknown> {
    return ((await t.cp.request('GET', `/v1/runs/local/${run}`)).json as { repo?: unknown }).repo;
  }

  function runFile(run: string, name: string): string {
    return readFileSync(join(t.repo.repo, '.svc', 'runs', run, name), 'utf8');
  }

  it('renames the earlier runs to the new name once, ships them, and keeps their receipts as signed', async () => {
    const first = await start('append fixed');
    assert.equal(await listed(first.run), 'work', 'without an origin the folder names it');
    assert.doesNotMatch(first.stderr, /now named/);

    execFileSync('git', ['remote', 'add', 'origin', join(t.repo.root, 'acme', 'api.git')], { cwd: t.repo.repo });
    // The checkout is that run's while it works: a second run takes a worktree of its own.
    const second = await start('append fixed again', '--worktree');
    assert.match(second.stderr, /this repository is now named acme\/api; 1 earlier run renamed from work \(their/);
    assert.equal(await listed(second.run), 'acme/api');
    assert.equal(await listed(first.run), 'acme/api', 'the earlier run now shows under the one name');
    assert.match(runFile(first.run, 'events.jsonl'), /repository renamed from work to acme\/api/);
    assert.equal((JSON.parse(runFile(first.run, join('artifacts', 'receipt.json'))) as { repo: string }).repo, 'work');
    const names = (await t.cp.request('GET', '/v1/runs?limit=50')).json as { items: Array<{ repo: string }> };
    assert.deepEqual([...new Set(names.items.map((r) => r.repo))], ['acme/api']);

    const third = await start('append fixed once more');
    assert.doesNotMatch(third.stderr, /now named/, 'nothing to rename: one file read');
  });

  it('keeps the last name per checkout in the git directory\'s info/, which no sandbox can write', () => {
    const cwd = t.repo.repo;
    const gitDir = execFileSync('git', ['rev-parse', '--git-common-dir'], { cwd, encoding: 'utf8' }).trim();
    // Written by the third start, whose scan found nothing left to rename.
    assert.equal(readFileSync(join(cwd, gitDir, 'info', 'svc-repo-names'), 'utf8'), `acme/api\t${cwd}\n`);
  });

  it('is not stopped by run folders it must not read: a FIFO, a link, one git tracks', async () => {
    const runs = join(t.repo.repo, '.svc', 'runs');
    mkdirSync(join(runs, 'rfifo'));
    execFileSync('mkfifo', [join(runs, 'rfifo', 'state.json')]);
    symlinkSync('/etc', join(runs, 'rlink'));
    mkdirSync(join(runs, 'rtracked'));
    const planted = { run: 'rtracked', repo: 'x', repo_path: t.repo.repo, status: 'succeeded', origin: 'cli' };
    writeFileSync(join(runs, 'rtracked', 'state.json'), JSON.stringify(planted));
    execFileSync('git', ['add', '-f', '.svc/runs/rtracked/state.json'], { cwd: t.repo.repo });
    execFileSync('git', ['remote', 'set-url', 'origin', join(t.repo.root, 'acme', 'web.git')], { cwd: t.repo.repo });
    const next = await start('append fixed under another name');
    assert.match(next.stderr, /now named acme\/web; \d+ earlier runs renamed from acme\/api/);
    assert.equal((JSON.parse(readFileSync(join(runs, 'rtracked', 'state.json'), 'utf8')) as { repo: string }).repo, 'x',
      'a run folder git tracks is a cloned repository\'s, never renamed');
  });
});

describe('a rename while an earlier run is still going', () => {
  const { t, start } = checkoutWithoutOrigin();

  it('leaves a run whose worker is alive alone, and renames it on a later start once it has ended', async () => {
    const first = await start('append fixed');
    const statePath = join(t.repo.repo, '.svc', 'runs', first.run, 'state.json');
    const ended = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
    // As a worker that is still running would have it: a process with a worker's command line for this run.
    const worker = await workerStandIn(first.run, t.repo.repo);
    try {
      const live = { status: 'running', pid: worker.pid, proc_start: procStart(worker.pid!) };
      writeFileSync(statePath, JSON.stringify({ ...ended, ...live }));
      execFileSync('git', ['remote', 'add', 'origin', join(t.repo.root, 'acme', 'api.git')], { cwd: t.repo.repo });

      // The checkout is that run's while it works: a second run takes a worktree of its own.
      const second = await start('append fixed again', '--worktree');
      assert.doesNotMatch(second.stderr, /now named/);
      assert.equal((JSON.parse(readFileSync(statePath, 'utf8')) as { repo: string }).repo, 'work');
    } finally {
      worker.kill('SIGKILL');
    }

    writeFileSync(statePath, JSON.stringify(ended));
    const third = await start('append fixed once more');
    assert.match(third.stderr, /now named acme\/api; 1 earlier run renamed from work/);
    assert.equal((JSON.parse(readFileSync(statePath, 'utf8')) as { repo: string }).repo, 'acme/api');
  });

  it('leaves an ended run alone while its worker, or its verify\'s, is still there to write it', async () => {
    const first = await start('append fixed, then linger');
    const statePath = join(t.repo.repo, '.svc', 'runs', first.run, 'state.json');
    const ended = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
    const nameOf = () => (JSON.parse(readFileSync(statePath, 'utf8')) as { repo: string }).repo;
    const before = nameOf();
    const worker = await workerStandIn(first.run, t.repo.repo);
    try {
      const identity = { pid: worker.pid, pgid: worker.pid, proc_start: procStart(worker.pid!) };
      // Its last attempt's worker still shipping the run's end (its pid is its last write), then a verify's worker.
      for (const [finishing, url] of [[identity, 'web'], [{ verifier: identity }, 'lib']] as const) {
        writeFileSync(statePath, JSON.stringify({ ...ended, ...finishing }));
        execFileSync('git', ['remote', 'set-url', 'origin', join(t.repo.root, 'acme', `${url}.git`)],
          { cwd: t.repo.repo });
        await start(`append fixed under ${url}`, '--worktree');
        assert.equal(nameOf(), before, 'the run its worker may still write was not renamed');
      }
    } finally {
      worker.kill('SIGKILL');
    }
    writeFileSync(statePath, JSON.stringify(ended));
    const later = await start('append fixed once its worker left', '--worktree');
    assert.match(later.stderr, /now named acme\/lib;/);
    assert.equal(nameOf(), 'acme/lib');
  });

  it('renames a run left running by a worker that died, since nobody owns its state', async () => {
    const first = await start('append fixed, then crash');
    const statePath = join(t.repo.repo, '.svc', 'runs', first.run, 'state.json');
    const ended = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
    // A pid that was never a live worker of ours: the start time cannot match.
    writeFileSync(statePath, JSON.stringify({ ...ended, status: 'running', pid: process.pid, proc_start: '1' }));
    execFileSync('git', ['remote', 'set-url', 'origin', join(t.repo.root, 'acme', 'ops.git')], { cwd: t.repo.repo });
    const next = await start('append fixed under ops');
    assert.match(next.stderr, /now named acme\/ops;/);
    assert.equal((JSON.parse(readFileSync(statePath, 'utf8')) as { repo: string }).repo, 'acme/ops');
  });
});
