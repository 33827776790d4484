// What a repository commits under .svc/runs is its content, never a run svc made (DESIGN §7a): localRuns skips it and
// refuseTrackedRun refuses it. A submodule's gitlink at .svc or .svc/runs commits everything behind it, and a git
// checkout git cannot read (here a corrupt index) fails closed: no run found, the run refused. A folder that is no
// git repository commits nothing.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localRuns, refuseTrackedRun, UntrackableError } from '../../src/engine/run-state.ts';
import { RefusedError } from '../../src/errors.ts';

const identity = ['-c', 'user.name=T', '-c', 'user.email=t@e', '-c', 'protocol.file.allow=always'];
const git = (repo: string, ...args: string[]) => execFileSync('git', ['-C', repo, ...identity, ...args]);

describe('run folders a repository commits (trackedNames)', () => {
  const folders: string[] = [];
  after(() => folders.forEach((folder) => rmSync(folder, { recursive: true, force: true })));

  /** A folder holding the run `run` at `<folder>/<runs>/<run>`; a git repository committing it when `repo`. */
  function folderWithRun(run: string, runs: string, repo: boolean): string {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-tracked-')));
    folders.push(dir);
    mkdirSync(join(dir, runs, run), { recursive: true });
    const at = new Date().toISOString();
    const state = { source: 'local', run, status: 'succeeded', started_at: at, updated_at: at };
    writeFileSync(join(dir, runs, run, 'state.json'), JSON.stringify(state));
    if (repo) {
      git(dir, 'init', '-q');
      git(dir, 'add', '-A');
      git(dir, 'commit', '-qm', 'a run folder');
    }
    return dir;
  }

  it('finds the runs of a folder that is no git repository', () => {
    const dir = folderWithRun('rplain', '.svc/runs', false);
    assert.deepEqual(localRuns(dir).map((found) => found.run), ['rplain']);
    refuseTrackedRun(dir, 'rplain');
  });

  for (const [at, runs] of [['.svc', 'runs'], ['.svc/runs', '.']] as const) {
    it(`takes every run folder behind a submodule committed at ${at} for the repository's`, () => {
      const inner = folderWithRun('rsub', runs, true);
      const outer = folderWithRun('rother', 'elsewhere', true);
      git(outer, 'submodule', 'add', '-q', inner, at);
      git(outer, 'commit', '-qm', 'a submodule where svc keeps its runs');
      assert.deepEqual(localRuns(outer), []);
      assert.throws(() => refuseTrackedRun(outer, 'rsub'), (err: Error) =>
        err instanceof RefusedError && /\.svc\/runs\/rsub is committed to the repository/.test(err.message));
    });
  }

  it('finds no run and refuses each when git cannot list what the checkout tracks', () => {
    const dir = folderWithRun('rcommitted', '.svc/runs', true);
    writeFileSync(join(dir, '.git', 'index'), 'not an index');
    assert.deepEqual(localRuns(dir), []);
    // Where "no run" would read as "nothing in use" (a free checkout, a worktree to remove), the reader says so.
    assert.throws(() => localRuns(dir, { strict: true }), (err: Error) => err instanceof UntrackableError);
    const reason = /^git could not list what the repository tracks \(git ls-files failed: /;
    assert.throws(() => refuseTrackedRun(dir, 'rcommitted'), (err: Error) =>
      err instanceof UntrackableError && err instanceof RefusedError && reason.test(err.message));
  });

  // A .git that is a link to the git directory is a checkout's too (some tools keep .git elsewhere).
  it('fails closed the same way when the checkout\'s .git is a link to its git directory', () => {
    const dir = folderWithRun('rlinked', 'app/.svc/runs', true);
    renameSync(join(dir, '.git'), join(dir, 'git-dir'));
    symlinkSync('git-dir', join(dir, '.git'));
    writeFileSync(join(dir, 'git-dir', 'index'), 'not an index');
    assert.throws(() => refuseTrackedRun(join(dir, 'app'), 'rlinked'), (err: Error) => err instanceof UntrackableError);
  });

  // An empty .git folder above (no repository) is none: git failing there is "no repository".
  it('finds the runs of a folder that is no git repository under a .git folder that is none either', () => {
    const dir = folderWithRun('rstray', 'app/.svc/runs', false);
    mkdirSync(join(dir, '.git'));
    const app = join(dir, 'app');
    assert.deepEqual(localRuns(app, { strict: true }).map((found) => found.run), ['rstray']);
    refuseTrackedRun(app, 'rstray');
  });

  // A project in a subfolder of a checkout has no .git of its own: git failing there is still a checkout's failure.
  it('fails closed the same way in a subfolder of a checkout that has no .git of its own', () => {
    const dir = folderWithRun('rdeep', 'app/.svc/runs', true);
    writeFileSync(join(dir, '.git', 'index'), 'not an index');
    const app = join(dir, 'app');
    assert.deepEqual(localRuns(app), []);
    assert.throws(() => localRuns(app, { strict: true }), (err: Error) => err instanceof UntrackableError);
    assert.throws(() => refuseTrackedRun(app, 'rdeep'), (err: Error) => err instanceof UntrackableError);
  });
});
