// A repository's own files never widen what svc does (DESIGN §7a). Three ways a push could: a committed link at
// .svc/worktrees or .svc/runs (the run's checkout, its files and the agent's writable tree would land where it points,
// e.g. HOME/.claude/skills), a committed run folder whose plan.json names no sandbox and any program (--retry,
// --resume, --verify, --open-pr would obey it), and a plan copied into a server's run with less sandbox than the
// server's own setting gives. Each is refused before anything runs.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { makeRepo, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { excludeEngineFolders } from '../../src/engine/git.ts';

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
}

function baseEnv(repo: TestRepo): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
    ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
}

function svc(repo: TestRepo, args: string[], env: NodeJS.ProcessEnv = baseEnv(repo)) {
  return runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
}

describe('committed links at .svc/worktrees and .svc/runs', () => {
  const repos: TestRepo[] = [];
  after(() => repos.forEach((r) => r.cleanup()));

  /** A repository that commits a link at `.svc/<name>` into the test HOME's .claude/skills. */
  function linkedRepo(name: 'worktrees' | 'runs'): { repo: TestRepo; target: string } {
    const repo = makeRepo();
    repos.push(repo);
    const target = join(repo.home, '.claude', 'skills');
    mkdirSync(target, { recursive: true });
    symlinkSync(target, join(repo.repo, '.svc', name));
    git(repo.repo, ['add', join('.svc', name)]);
    git(repo.repo, ['commit', '-qm', 'a link where svc keeps its folders']);
    return { repo, target };
  }

  for (const [name, flags] of [['worktrees', ['--worktree']], ['runs', []]] as const) {
    it(`refuses a run when .svc/${name} is a committed link, and writes nothing through it`, async () => {
      const { repo, target } = linkedRepo(name);
      const res = await svc(repo, ['--brief', 'edit a.txt', ...flags, '--provider', 'fake']);
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /Refusing to start: svc keeps its runs and worktrees in plain folders/);
      assert.match(res.stderr, new RegExp(`\\.svc/${name}.*not a plain directory`));
      assert.deepEqual(readdirSync(target), [], 'nothing was made where the link points');
    });
  }

  it('keeps a link an agent makes at .svc/runs or .svc/worktrees out of git add -A', () => {
    const repo = makeRepo();
    repos.push(repo);
    excludeEngineFolders(join(repo.repo, '.git'));
    for (const name of ['runs', 'worktrees', 'inbox', 'ship-pending']) {
      symlinkSync(repo.home, join(repo.repo, '.svc', name));
    }
    git(repo.repo, ['add', '-A']);
    const staged = git(repo.repo, ['diff', '--cached', '--name-only']).split('\n').filter(Boolean);
    assert.deepEqual(staged, ['.svc/config.json'], 'only the repository\'s own file is added');
  });
});
