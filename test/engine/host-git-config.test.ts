// svc's own git reads no global or system config: an agent that once wrote ~/.gitconfig (or ~/.config/git/*) gets no
// program run on the host by svc's `git worktree add`, commit, diff or push. Each setting below would leave a mark in
// a file if git ran what it names; a --pr run, a push with no token and a managed checkout must leave none. The
// repository's own .git/config filters are switched off for the host checkout too.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, startGithubStandIn, CLI, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { pinPushTarget, pushBranch } from '../../src/engine/git-push.ts';
import { createWorktree } from '../../src/engine/git.ts';
import { createManagedCheckouts } from '../../src/trigger/managed-checkout.ts';
import { createLogger } from '../../src/log.ts';

/** A global config whose every program-naming setting runs `mark` with its own name. */
function poisonHome(home: string, mark: string, root: string): void {
  const hooks = join(root, 'global-hooks');
  mkdirSync(hooks, { recursive: true });
  for (const hook of ['post-checkout', 'pre-commit', 'post-commit', 'pre-push', 'reference-transaction']) {
    writeFileSync(join(hooks, hook), `#!/bin/sh\n${mark} hook-${hook}\n`);
    chmodSync(join(hooks, hook), 0o755);
  }
  const attributes = join(root, 'global-attributes');
  writeFileSync(attributes, '* filter=mark diff=mark\n');
  const included = join(root, 'included.gitconfig');
  writeFileSync(included, `[core]\n\tsshCommand = ${mark} include-ssh\n[credential]\n\thelper = !${mark} include-helper\n` +
    `[filter "mark"]\n\tsmudge = ${mark} include-smudge\n`);
  writeFileSync(join(home, '.gitconfig'), [
    '[filter "mark"]', `\tclean = ${mark} filter-clean`, `\tsmudge = ${mark} filter-smudge`, '\trequired = true',
    '[diff "mark"]', `\ttextconv = ${mark} textconv`, `\tcommand = ${mark} diff-command`,
    '[core]', `\tfsmonitor = ${mark} fsmonitor`, `\thooksPath = ${hooks}`, `\tattributesFile = ${attributes}`,
    '[includeIf "gitdir:/"]', `\tpath = ${included}`,
    '[credential]', `\thelper = !${mark} credential-helper`,
    '[user]', '\tname = Poisoned', '\temail = poisoned@example.test', '',
  ].join('\n'));
  // The XDG location git also reads as global config.
  mkdirSync(join(home, '.config', 'git'), { recursive: true });
  writeFileSync(join(home, '.config', 'git', 'config'), `[core]\n\tfsmonitor = ${mark} xdg-fsmonitor\n`);
  writeFileSync(join(home, '.config', 'git', 'attributes'), '* filter=mark\n');
}

/** A script that appends its first argument to `marks` and passes stdin through (so a filter still "works"). */
function markScript(root: string, marks: string): string {
  const path = join(root, 'mark.sh');
  writeFileSync(path, `#!/bin/sh\necho "$1" >> "${marks}"\ncat\n`);
  chmodSync(path, 0o755);
  return path;
}

function marksIn(path: string): string[] {
  return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : [];
}

describe('svc\'s git with a poisoned global git config', () => {
  let repo: TestRepo;
  let marks: string;
  let mark: string;
  let github: StandIn;

  before(async () => {
    github = await startGithubStandIn();
    const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
    marks = join(repo.root, 'marks');
    mark = markScript(repo.root, marks);
    // The poison works: the same config makes a plain git run each program (checked before svc is).
    const probe = join(repo.root, 'probe-home');
    mkdirSync(probe);
    poisonHome(probe, mark, repo.root);
    execFileSync('git', ['-c', `core.hooksPath=${join(repo.root, 'global-hooks')}`, 'worktree', 'add', '-q',
      join(repo.root, 'probe-tree'), 'HEAD'], { cwd: repo.repo, env: { ...process.env, HOME: probe }, stdio: 'ignore' });
    const seen = marksIn(marks);
    assert.ok(seen.includes('hook-post-checkout') && seen.some((m) => m.endsWith('smudge')), `probe saw ${seen}`);
    execFileSync('git', ['worktree', 'remove', '--force', join(repo.root, 'probe-tree')], { cwd: repo.repo });
    writeFileSync(marks, '');
    poisonHome(repo.home, mark, repo.root);
  });
  after(async () => {
    await github.close();
    repo.cleanup();
  });

  it('runs nothing it names during svc start --pr (worktree add, commit, diff, checks, push)', async () => {
    const env = { PATH: `${repo.bin}:/usr/bin:/bin`, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
      SVC_CONTROL_URL: 'http://127.0.0.1:9', GITHUB_TOKEN: 'not-for-a-local-origin', GITHUB_API_URL: github.url };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.equal(state.status, 'succeeded', `${state.error} ${res.stderr}`);
    assert.equal(state.worktree, true, 'the run worked in a worktree svc added');
    assert.ok(existsSync(join(repo.origin, 'refs', 'heads', 'svc', run)), 'the branch was pushed');
    assert.deepEqual(marksIn(marks), []);
    const author = execFileSync('git', ['log', '-1', '--format=%an', `svc/${run}`], { cwd: repo.origin, encoding: 'utf8' });
    assert.notEqual(author.trim(), 'Poisoned', 'the committer is not read from the global config');
  });

  it('asks no credential helper it names when a push without a token meets a server asking for one', async () => {
    const server: ChildProcess = spawn(process.execPath, ['-e', `
      const s = require('node:http').createServer((q, r) => r.writeHead(401, { 'www-authenticate': 'Basic realm="x"' }).end());
      s.listen(0, '127.0.0.1', () => console.log(s.address().port));`], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((r) => server.stdout!.once('data', (c: Buffer) => r(c.toString().trim())));
    const dir = join(repo.root, 'push-repo');
    mkdirSync(dir);
    for (const args of [['init', '-q', '-b', 'main'], ['commit', '-q', '--allow-empty', '-m', 'x'],
      ['remote', 'add', 'origin', `http://127.0.0.1:${port}/acme/api.git`], ['branch', 'svc/r1']]) {
      execFileSync('git', args, { cwd: dir, env: { ...process.env, ...GIT_ENV, HOME: repo.root } });
    }
    const saved = process.env.HOME;
    process.env.HOME = repo.home;
    try {
      await assert.rejects(pushBranch(dir, pinPushTarget(dir), 'svc/r1', null, {}), /git push failed/);
    } finally {
      process.env.HOME = saved;
      server.kill();
    }
    assert.deepEqual(marksIn(marks), []);
  });

  it('runs nothing it names when the trigger server fetches and checks out a clone= repository', async () => {
    const stateDir = join(repo.root, 'trigger-state');
    const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(repo.root, 'checkouts'),
      env: { PATH: process.env.PATH, HOME: repo.home }, log: createLogger('test', () => {}) });
    const keys = { errtrack: [], trackera: [], trackerb: [], chata: [], chatb: [] };
    const served = { name: 'acme/api', checkout: null, clone: `file://${repo.origin}`, keys, isDefault: false, line: 1 };
    const dir = await managed.prepare(served, { id: 'j1', origin: 'jobs', args: [] });
    assert.equal(readFileSync(join(dir, 'a.txt'), 'utf8'), 'hello\n');
    await managed.idle(); // the next job's spare checkout, made after the answer, before the folder goes
    assert.deepEqual(marksIn(marks), []);
  });

  it('checks a worktree out with no filter the repository\'s own config names', () => {
    execFileSync('git', ['config', 'filter.local.smudge', `${mark} repo-smudge`], { cwd: repo.repo });
    execFileSync('git', ['config', 'filter.local.required', 'true'], { cwd: repo.repo });
    writeFileSync(join(repo.repo, '.git', 'info', 'attributes'), '*.txt filter=local\n');
    const saved = process.env.HOME;
    process.env.HOME = repo.home;
    try {
      createWorktree(repo.repo, join(repo.root, 'wt-local'), 'svc/local', 'HEAD');
    } finally {
      process.env.HOME = saved;
    }
    assert.equal(readFileSync(join(repo.root, 'wt-local', 'a.txt'), 'utf8'), 'hello\n');
    assert.deepEqual(marksIn(marks), []);
  });
});
