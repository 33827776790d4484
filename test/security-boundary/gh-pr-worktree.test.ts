// `gh pr create` (the PR path when no token is set) runs git itself before anything else (it counts uncommitted
// changes with `git status`). Run in the agent's worktree, that git entered a submodule the agent had filled in and
// ran the clean filter the agent's own `.git/config` named, on the host, as svc's user (DESIGN §7a: nothing the
// agent wrote runs outside the sandbox). gh gets `--repo` and `--head`, so it needs no checkout: it runs elsewhere.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPullRequest } from '../../src/engine/pr.ts';
import { pinPushTarget } from '../../src/engine/git-push.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-gh-pr-'));
const gitEnv: NodeJS.ProcessEnv = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
delete gitEnv.GITHUB_TOKEN;
delete gitEnv.GH_TOKEN;

function git(cwd: string, ...args: string[]): string {
  const argv = ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args];
  return execFileSync('git', argv, { cwd, env: gitEnv, encoding: 'utf8' });
}

/** A project with a submodule at vendor/lib, pushed to a local bare origin named like GitHub's owner/proj. */
function projectWithSubmodule(): string {
  mkdirSync(join(root, 'owner'));
  git(root, 'init', '-q', '--bare', 'owner/proj.git');
  git(root, 'init', '-q', 'lib');
  git(join(root, 'lib'), 'commit', '-q', '--allow-empty', '-m', 'lib');
  const lib = git(join(root, 'lib'), 'rev-parse', 'HEAD').trim();
  const project = join(root, 'proj');
  git(root, 'init', '-q', '-b', 'main', 'proj');
  const gitmodules = '[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = https://github.com/o/lib\n';
  writeFileSync(join(project, '.gitmodules'), gitmodules);
  git(project, 'add', '.gitmodules');
  git(project, 'update-index', '--add', '--cacheinfo', `160000,${lib},vendor/lib`);
  git(project, 'commit', '-q', '-m', 'base');
  git(project, 'remote', 'add', 'origin', join(root, 'owner/proj.git'));
  git(project, 'push', '-q', 'origin', 'main');
  return project;
}

/** What an agent can do writing only its worktree: a repository at the submodule's path with a clean filter. */
function plantFilter(worktree: string, proof: string): void {
  const sub = join(worktree, 'vendor/lib');
  rmSync(sub, { recursive: true, force: true });
  git(worktree, 'init', '-q', 'vendor/lib');
  writeFileSync(join(sub, 'a'), 'aaaa\n');
  writeFileSync(join(sub, '.gitattributes'), 'a filter=x\n');
  git(sub, 'add', 'a', '.gitattributes');
  git(sub, 'commit', '-q', '-m', 'a');
  writeFileSync(join(sub, '.git/clean'), `#!/bin/sh\necho "$PWD" > '${proof}'\ncat\n`);
  chmodSync(join(sub, '.git/clean'), 0o755);
  git(sub, 'config', 'filter.x.clean', join(sub, '.git/clean'));
  // An old mtime makes git read the file again, through the filter.
  execFileSync('touch', ['-d', '2001-01-01', join(sub, 'a')]);
}

describe('the gh pull-request path', () => {
  after(() => rmSync(root, { recursive: true, force: true }));

  it('runs gh outside the agent\'s worktree, so no git it runs reads what the agent wrote', async () => {
    const project = projectWithSubmodule();
    const target = pinPushTarget(project);
    const worktree = join(project, '.svc/worktrees/r1');
    git(project, 'worktree', 'add', '-q', '-b', 'svc/r1', worktree);
    const proof = join(root, 'filter-ran');
    plantFilter(worktree, proof);
    // A stand-in gh: no login (`auth` fails, so svc takes this path); `pr create` first runs git as gh does.
    const bin = join(root, 'bin');
    const ghCwd = join(root, 'gh-cwd');
    mkdirSync(bin);
    writeFileSync(join(bin, 'gh'), `#!/bin/sh\n[ "$1" = auth ] && exit 1\npwd > '${ghCwd}'\n` +
      'git status --porcelain >/dev/null 2>&1\necho https://github.com/owner/proj/pull/1\n');
    chmodSync(join(bin, 'gh'), 0o755);
    const env = { ...gitEnv, PATH: `${bin}:${process.env.PATH}` };
    const pr = await openPullRequest({ workdir: worktree, branch: 'svc/r1', base: 'main', title: 't', body: 'b',
      draft: false, target, env });
    assert.equal(pr.via, 'gh');
    assert.equal(pr.url, 'https://github.com/owner/proj/pull/1');
    const ranIn = existsSync(proof) ? readFileSync(proof, 'utf8') : '';
    assert.equal(ranIn, '', 'the agent\'s clean filter ran on the host');
    assert.ok(!readFileSync(ghCwd, 'utf8').trim().startsWith(project), 'gh ran outside the project');
    assert.equal(git(join(root, 'owner/proj.git'), 'rev-parse', 'svc/r1'), git(worktree, 'rev-parse', 'HEAD'),
      'the branch was pushed');
  });

  /** A PR opened through a stand-in gh that has no login and fails `pr create` saying `said` on stderr. */
  function openThroughFailingGh(run: string, said: string, title: string) {
    const project = join(root, 'proj');
    const worktree = join(project, `.svc/worktrees/${run}`);
    git(project, 'worktree', 'add', '-q', '-b', `svc/${run}`, worktree);
    const bin = join(root, `${run}-bin`);
    mkdirSync(bin);
    writeFileSync(join(bin, 'gh'), `#!/bin/sh\n[ "$1" = auth ] && exit 1\necho '${said}' >&2\nexit 1\n`);
    chmodSync(join(bin, 'gh'), 0o755);
    const env = { ...gitEnv, PATH: `${bin}:${process.env.PATH}` };
    return openPullRequest({ workdir: worktree, branch: `svc/${run}`, base: 'main', title, body: 'b', draft: false,
      target: pinPushTarget(project), env });
  }

  // gh before 2.19 fails outside a git repository even when given --repo (cli/cli #5075, #6527).
  it('names the gh version to upgrade to, or the token to set, when gh wants a git repository', async () => {
    const said = 'fatal: not a git repository (or any of the parent directories): .git';
    await assert.rejects(openThroughFailingGh('r2', said, 't'), /upgrade gh to 2\.19 or later, or set GITHUB_TOKEN/);
  });

  it('keeps gh\'s own error when only the title says "not a git repository"', async () => {
    const title = 'svc: fix "fatal: not a git repository" in the build';
    await assert.rejects(openThroughFailingGh('r3', 'HTTP 401: Bad credentials', title),
      (err: Error) => !/upgrade gh/.test(err.message));
  });
});
