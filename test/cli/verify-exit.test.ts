// `svc start --verify` exits 0 only when it verified something: a receipt of its own, on a change, not not_verified.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeRepo, CLI, EDIT_SCRIPT, GIT_ENV } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { prepareRun } from '../../src/engine/launch.ts';

describe('svc start --verify', () => {
  const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
  after(() => repo.cleanup());
  const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_SANDBOX: 'none' };
  const svc = (...args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });

  it('exits 1 on a stopped run, whose work was cut off, though its receipt says verified_with_gaps', async () => {
    const made = { input: 'a brief', forceBrief: true, pr: false, provider: 'fake', repo: repo.repo, env };
    await prepareRun({ ...made, worktree: true, runId: 'stop1' });
    const stopped = await svc('--stop', 'stop1');
    assert.equal(stopped.code, 0, stopped.stderr);
    const verify = await svc('--verify', 'stop1');
    assert.equal(verify.code, 1, verify.stderr);
    assert.match(verify.stdout, /"status":"stopped","verdict":"verified_with_gaps"/);
    assert.match(verify.stderr, /^svc start: verify: the run was stopped before its end: its work is unfinished$/m);
  });

  it('exits 0 on a run whose change it verified again', async () => {
    const started = await svc('--brief', 'append fixed', '--provider', 'fake', '--worktree');
    assert.equal(started.code, 0, started.stderr);
    const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
    const verify = await svc('--verify', run);
    assert.equal(verify.code, 0, verify.stderr);
    assert.doesNotMatch(verify.stderr, /svc start: verify:/);
  });
});
