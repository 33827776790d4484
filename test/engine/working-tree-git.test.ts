// svc's git on a working tree (a checkout without a worktree, or the tree an agent left): a repository whose config
// includes a file of its work tree is refused before any such git runs, and a FIFO where git reads its rules fails the
// run at once instead of blocking svc's git for ever.
import { describe, it, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import {
  commitAll, IncludedTreeConfigError, runWorktreeGitDir, treeGit, UnreadableTreeError, type GitRun,
} from '../../src/engine/git.ts';
import { diffCommits } from '../../src/engine/diff.ts';

/** A filter that, if git ever ran it, leaves .git/filter-ran (its working directory is the tree's root). */
const FILTER = '#!/bin/sh\necho ran >> .git/filter-ran\ncat\n';
const FILTER_CONFIG = '[filter "x"]\n\tclean = ./.evil.sh\n\tsmudge = ./.evil.sh\n';

/** The agent writes the include's target, the filter and the attributes selecting it, then edits a.txt. */
const WRITES_FILTER = `#!/bin/sh
cat > /dev/null
printf '${FILTER.replace(/\n/g, '\\n')}' > .evil.sh
chmod +x .evil.sh
printf '${FILTER_CONFIG.replace(/\n/g, '\\n').replace(/\t/g, '\\t')}' > .gitconfig
echo '* filter=x' > .gitattributes
echo fixed >> a.txt
`;

const MAKES_FIFO = `#!/bin/sh
cat > /dev/null
echo fixed >> a.txt
mkfifo .gitattributes
`;

/** The operator's .git/config includes the checkout's .gitconfig (a common way to share repository config). */
function includeCheckoutConfig(repo: TestRepo): void {
  execFileSync('git', ['config', 'include.path', '../.gitconfig'], { cwd: repo.repo });
}

function start(repo: TestRepo, args: string[], timeout: number) {
  const env = { PATH: `${repo.bin}:/usr/bin:/bin`, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
    SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  return runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--provider', 'fake', ...args],
    { cwd: repo.repo, env, timeout });
}

function onlyRunState(repo: TestRepo): Record<string, unknown> {
  const runs = readdirSync(join(repo.repo, '.svc', 'runs'));
  assert.equal(runs.length, 1);
  return readJson(join(repo.repo, '.svc', 'runs', runs[0]!, 'state.json'));
}

describe('svc\'s git on a working tree', () => {
  let repo: TestRepo | null = null;
  afterEach(() => repo?.cleanup());

  // The include is read without following it, so a file written into the tree later (by an agent) changes nothing.
  for (const [how, args] of [['in the checkout', []], ['in a worktree run', ['--worktree']]] as const) {
    it(`refuses a repository whose config includes a file of its work tree, ${how}, running no filter`, async () => {
      repo = makeRepo({ providers: { fake: WRITES_FILTER } });
      includeCheckoutConfig(repo);
      writeFileSync(join(repo.repo, '.evil.sh'), FILTER, { mode: 0o755 });
      writeFileSync(join(repo.repo, '.gitconfig'), FILTER_CONFIG);
      writeFileSync(join(repo.repo, '.gitattributes'), '* filter=x\n');
      // The filter works: a plain git on this checkout runs it.
      execFileSync('git', ['add', '--dry-run', '-A'], { cwd: repo.repo, stdio: 'ignore' });
      assert.ok(existsSync(join(repo.repo, '.git', 'filter-ran')), 'the probe git ran the filter');
      execFileSync('rm', [join(repo.repo, '.git', 'filter-ran')]);
      const res = await start(repo, [...args], 60_000);
      assert.equal(existsSync(join(repo.repo, '.git', 'filter-ran')), false, 'svc\'s git ran the filter');
      assert.match(`${res.stderr}${res.stdout}`, /includes \S+\.gitconfig, a file of its work tree/);
    });
  }

  it('tells an include of the tree from one of the git directory, through links and /proc', () => {
    repo = makeRepo();
    const at = (path: string) => {
      execFileSync('git', ['config', '--replace-all', 'include.path', path], { cwd: repo!.repo });
      return () => treeGit(repo!.repo);
    };
    const links = mkdtempSync(join(tmpdir(), 'svc-include-'));
    try {
      symlinkSync(repo.repo, join(links, 'alias'));
      assert.throws(at(join(links, 'alias', '.gitconfig')), IncludedTreeConfigError);
      assert.throws(at('/proc/self/cwd/.gitconfig'), IncludedTreeConfigError);
      assert.throws(at('../sub/x.conf'), IncludedTreeConfigError);
      at('config.local')();
      at(join(links, 'elsewhere.conf'))();
    } finally {
      rmSync(links, { recursive: true, force: true });
    }
  });

  // A repository at the filesystem root has every file in its work tree: no include can be outside it.
  it('refuses any include of a repository whose work tree is the filesystem root', () => {
    const atRoot: GitRun = (_cwd, argv) => argv.includes('rev-parse') ? '/.git\n/.git\n'
      : 'file:/.git/config\0include.path\n/etc/shared.gitconfig\0';
    assert.throws(() => treeGit('/', atRoot), IncludedTreeConfigError);
  });

  it('fails the run as the agent\'s, naming it, when the agent leaves a FIFO .gitattributes', async () => {
    repo = makeRepo({ providers: { fake: MAKES_FIFO } });
    const res = await start(repo, ['--worktree'], 60_000);
    assert.equal(res.signal, null, `svc start did not end within 60 s: ${res.stderr}`);
    const state = onlyRunState(repo);
    assert.equal(state.status, 'failed');
    assert.equal((state.failure as { class: string }).class, 'agent');
    assert.match(String(state.error), /\.gitattributes is a FIFO, not a regular file/);
    assert.ok(existsSync(join(repo.repo, '.svc', 'runs', String(state.run), 'artifacts', 'receipt.json')), 'a receipt was issued');
  });

  it('refuses to start in a checkout whose .gitignore is a FIFO, naming it', async () => {
    repo = makeRepo();
    execFileSync('mkfifo', [join(repo.repo, '.gitignore')]);
    const res = await start(repo, [], 20_000);
    assert.equal(res.signal, null, 'svc start did not end within 20 s');
    assert.equal(res.code, 1);
    assert.match(res.stderr, /\.gitignore is a FIFO, not a regular file/);
  });

  it('ends a git that a FIFO deeper in the tree blocks, after its time limit', () => {
    repo = makeRepo();
    mkdirSync(join(repo.repo, 'sub'));
    writeFileSync(join(repo.repo, 'sub', 'f'), 'x\n');
    execFileSync('mkfifo', [join(repo.repo, 'sub', '.gitattributes')]);
    // The error names the time limit that ended git: only that limit's kill says so (no clock needed to show it).
    assert.throws(() => commitAll(treeGit(repo!.repo, undefined, 1000), 'm', repo!.repo),
      (err) => err instanceof UnreadableTreeError && /git add did not end within 1 s/.test(err.message));
  });

  // A git in svc's sandbox dies by SIGKILL when its bwrap is ended: this run kills git that way.
  const killedMidWrite: GitRun = (cwd, argv, { extra, timeout }) => execFileSync(argv[0]!, argv.slice(1),
    { cwd, env: { ...process.env, ...GIT_ENV, ...extra }, timeout, killSignal: 'SIGKILL', encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'] });

  /** A worktree of `repo` as svc makes one for a run, with its git directory as svc computes it. */
  function runWorktree(made: TestRepo): { tree: string; gitDir: string } {
    const tree = join(made.root, 'wt');
    execFileSync('git', ['worktree', 'add', '-q', '-b', 'w', tree],
      { cwd: made.repo, env: { ...process.env, ...GIT_ENV } });
    const gitDir = runWorktreeGitDir(made.repo, tree);
    assert.ok(gitDir !== null);
    return { tree, gitDir };
  }

  function blockedSub(tree: string): void {
    mkdirSync(join(tree, 'sub'));
    writeFileSync(join(tree, 'sub', 'f'), 'x\n');
    execFileSync('mkfifo', [join(tree, 'sub', '.gitattributes')]);
  }

  it('removes the index.lock of a git it killed mid-write in a worktree it made, keeping one that was there', () => {
    repo = makeRepo();
    const { tree, gitDir } = runWorktree(repo);
    blockedSub(tree);
    writeFileSync(join(gitDir, 'HEAD.lock'), 'another git\'s\n');
    assert.throws(() => commitAll(treeGit(tree, killedMidWrite, 1000, gitDir), 'm', repo!.repo),
      (err) => err instanceof UnreadableTreeError && /git add did not end within 1 s/.test(err.message));
    assert.equal(existsSync(join(gitDir, 'index.lock')), false, 'the killed git\'s index.lock is left');
    assert.ok(existsSync(join(gitDir, 'HEAD.lock')), 'a lock that was there before svc\'s git was removed');
    // A retry of the same tree works once the FIFO is gone.
    rmSync(join(gitDir, 'HEAD.lock'));
    rmSync(join(tree, 'sub', '.gitattributes'));
    commitAll(treeGit(tree, killedMidWrite, 10_000, gitDir), 'm', repo.repo);
    assert.equal(execFileSync('git', ['log', '-1', '--format=%s'], { cwd: tree, encoding: 'utf8' }).trim(), 'm');
  });

  // The user's own git may hold that lock closed (`git commit` waiting on its editor): svc names it and leaves it.
  it('keeps the lock a killed git left in the checkout itself, and its error names it', () => {
    repo = makeRepo();
    blockedSub(repo.repo);
    assert.throws(() => commitAll(treeGit(repo!.repo, killedMidWrite, 1000), 'm', repo!.repo),
      (err) => err instanceof UnreadableTreeError &&
        /index\.lock .*`git rev-parse --git-path index\.lock`/.test(err.message));
    assert.ok(existsSync(join(repo.repo, '.git', 'index.lock')));
  });

  // An agent's `.git` file naming the checkout's git directory does not put the user's locks in reach.
  it('keeps a fresh lock in the git directory a worktree\'s .git file names instead of its own', () => {
    repo = makeRepo();
    const { tree, gitDir } = runWorktree(repo);
    const userLock = join(repo.repo, '.git', 'index.lock');
    writeFileSync(join(tree, '.git'), `gitdir: ${join(repo.repo, '.git')}\n`);
    assert.equal(runWorktreeGitDir(repo.repo, tree), gitDir);
    const userCommitsMeanwhile: GitRun = () => {
      writeFileSync(userLock, '');
      throw Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' });
    };
    assert.throws(() => treeGit(tree, userCommitsMeanwhile, 1000, gitDir).run(tree, ['git', 'add', '-A'],
      { extra: {}, scratch: [], timeout: 1000 }), UnreadableTreeError);
    assert.ok(existsSync(userLock), 'the user\'s git lost its index.lock');
  });

  it('names no git directory for a worktree whose git directory is reached through a link', () => {
    repo = makeRepo();
    const { tree, gitDir } = runWorktree(repo);
    renameSync(gitDir, join(repo.root, 'elsewhere'));
    symlinkSync(join(repo.root, 'elsewhere'), gitDir);
    assert.equal(runWorktreeGitDir(repo.repo, tree), null);
  });

  it('hashes a patch past 2 GiB a piece at a time, keeping its files but not the patch', () => {
    // What git writes for the gigabytes an agent can leave (limits.disk_mb is 4 GiB by default): sparse here.
    const size = 2 ** 31 + 4096;
    const sparseGit: GitRun = (_cwd, argv) => {
      const output = argv.find((arg) => arg.startsWith('--output='));
      if (output) execFileSync('truncate', ['-s', String(size), output.slice('--output='.length)]);
      return argv.includes('--numstat') ? '-\t-\tbig.bin\n' : '';
    };
    const diff = diffCommits('/', 'a'.repeat(40), 'b'.repeat(40), sparseGit);
    // sha256sum of that many zero bytes.
    assert.equal(diff.patch_sha256, 'd702231a97a4e742e747bd3fdc81d8d1b604378660d5fc38934b865ca2a9d6d1');
    assert.match(diff.patch, new RegExp(`the patch is ${size} bytes, more than the \\d+-byte cap`));
    assert.deepEqual(diff.files, [{ path: 'big.bin', insertions: 0, deletions: 0 }]);
  });
});
