// `svc start --pr` without GitHub credentials (issue 23 item 5): the run does its work and says why there is no pull
// request, and pushes nothing (a branch without its PR helps nobody); a repository without an origin is told how to
// add one.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, EDIT_SCRIPT, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';

describe('svc start --pr without what a pull request needs', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
    // No token, and a PATH on which no `gh` can be found.
    env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  });
  after(() => repo.cleanup());

  async function start(): Promise<any> {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    return readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  }

  it('pushes nothing when no pull request could be opened, and says so', async () => {
    const state = await start();
    assert.equal(state.status, 'failed');
    assert.match(state.error, /No GitHub credentials: set GITHUB_TOKEN or GH_TOKEN, or log in with gh/);
    assert.match(state.error, /\(nothing was pushed\)/);
    assert.equal(existsSync(join(repo.origin, 'refs', 'heads', 'svc', state.run)), false, 'no branch was pushed');
  });

  it('names `git remote add origin` when the repository has no origin', async () => {
    execFileSync('git', ['remote', 'remove', 'origin'], { cwd: repo.repo });
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /found 0\): add the GitHub repository, /);
    assert.match(res.stderr, /`git remote add origin https:\/\/github\.com\/OWNER\/NAME\.git`/);
  });
});
