// A run's `repo`: the routed served entry's owner/name when a trigger server launched it, else the
// checkout's origin. SVC_REPO_NAME from anywhere else, or not an owner/name, is not taken.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRepoName } from '../../src/engine/launch.ts';

describe('runRepoName', () => {
  const repo = mkdtempSync(join(tmpdir(), 'svc-repo-name-'));
  execFileSync('git', ['init', '-q', repo]);
  execFileSync('git', ['-C', repo, 'remote', 'add', 'origin', 'https://github.com/someone/fork.git']);
  after(() => rmSync(repo, { recursive: true, force: true }));

  it('takes the launcher\'s routed name for a trigger-started run', () => {
    assert.equal(runRepoName(repo, { SVC_ORIGIN: 'github', SVC_REPO_NAME: 'acme/web' }), 'acme/web');
    assert.equal(runRepoName(repo, { SVC_ORIGIN: 'chata', SVC_REPO_NAME: 'acme/web' }), 'acme/web');
  });

  it('names any other run from its checkout', () => {
    for (const env of [
      { SVC_REPO_NAME: 'acme/web' }, { SVC_ORIGIN: 'cli', SVC_REPO_NAME: 'acme/web' },
      { SVC_ORIGIN: 'control', SVC_REPO_NAME: 'acme/web' }, { SVC_ORIGIN: 'github' },
      { SVC_ORIGIN: 'github', SVC_REPO_NAME: '../../etc' }, { SVC_ORIGIN: 'github', SVC_REPO_NAME: 'acme/web/x' },
      { SVC_ORIGIN: 'github', SVC_REPO_NAME: 'acme/web.git' },
    ]) assert.equal(runRepoName(repo, env), 'someone/fork', JSON.stringify(env));
  });
});
