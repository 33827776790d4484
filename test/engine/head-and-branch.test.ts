// headAndBranch tells a checkout with no commit yet from one whose HEAD names a ref git cannot read, and a git that
// hangs on reading HEAD ends in its time limit's error, never read as either.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BrokenHeadError, GitTimeoutError, headAndBranch, hostGit, type GitRun } from '../../src/engine/git.ts';
import { BadInputError } from '../../src/errors.ts';

describe('headAndBranch', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-head-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  /** A repository on branch main, with one commit when `commit`. */
  function repo(name: string, commit: boolean): string {
    const dir = join(root, name);
    execFileSync('git', ['init', '-q', '-b', 'main', dir]);
    if (commit) {
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'x'],
        { cwd: dir });
    }
    return dir;
  }

  function thrown(fn: () => unknown): unknown {
    try {
      fn();
    } catch (err) {
      return err;
    }
    assert.fail('no error');
  }

  it('reads a checkout with commits as its commit and branch', () => {
    const dir = repo('ok', true);
    const head = headAndBranch(dir);
    assert.equal(head.branch, 'main');
    assert.match(head.sha, /^[0-9a-f]{40}$/);
  });

  it('says a checkout whose branch was never made has no commits yet, not that HEAD is broken', () => {
    const err = thrown(() => headAndBranch(repo('empty', false)));
    assert.ok(err instanceof BadInputError && !(err instanceof BrokenHeadError), String(err));
  });

  it('says a HEAD naming a corrupt ref is broken, not that there are no commits yet', () => {
    const dir = repo('broken', true);
    writeFileSync(join(dir, '.git', 'refs', 'heads', 'main'), 'not a commit\n');
    const err = thrown(() => headAndBranch(dir));
    assert.ok(err instanceof BrokenHeadError, String(err));
    assert.equal(err.code, 'bad_input');
  });

  it('ends a git that hangs reading HEAD with its time limit\'s error, asking no other git', () => {
    const dir = repo('hung', true);
    const ref = join(dir, '.git', 'refs', 'heads', 'main');
    rmSync(ref);
    // A FIFO no one writes: git's read of the ref waits for ever, and only the time limit's kill ends it.
    execFileSync('mkfifo', [ref]);
    const gits: string[][] = [];
    const shortLimit: GitRun = (cwd, argv, opts) => {
      gits.push(argv);
      return hostGit(cwd, argv, { ...opts, timeout: 1000 });
    };
    assert.ok(thrown(() => headAndBranch(dir, shortLimit)) instanceof GitTimeoutError);
    assert.equal(gits.length, 1, 'the timed-out git is not followed by one reading the git directories');
  });

  it('ends a git that hangs telling a broken HEAD from a new branch with its time limit\'s error', () => {
    const dir = repo('hung-check', true);
    const ref = join(dir, '.git', 'refs', 'heads', 'main');
    writeFileSync(ref, 'not a commit\n');
    // The first git fails on the corrupt ref; before the check that follows it, the ref becomes a FIFO no one writes.
    const hangOnCheck: GitRun = (cwd, argv, opts) => {
      if (!argv.includes('symbolic-ref')) return hostGit(cwd, argv, opts);
      rmSync(ref);
      execFileSync('mkfifo', [ref]);
      return hostGit(cwd, argv, { ...opts, timeout: 1000 });
    };
    const err = thrown(() => headAndBranch(dir, hangOnCheck));
    assert.ok(err instanceof GitTimeoutError, String(err));
  });
});
