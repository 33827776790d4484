// The repository name runs are listed under (src/engine/git.ts repoName), read from real git repositories:
// a folder name until origin is a hosted URL, never owner/name made of local folders (issue 23 item 9).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoName } from '../../src/engine/git.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-repo-name-'));
const repo = join(dir, 'repo');
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: 'pipe' });
const setOrigin = (url: string) => git(repo, 'remote', 'set-url', 'origin', url);

before(() => {
  mkdirSync(repo);
  git(repo, 'init', '-q');
  // A newcomer's "remote": a bare repository in their home folder, /…/newcomer/origin.git.
  mkdirSync(join(dir, 'newcomer'));
  git(join(dir, 'newcomer'), 'init', '-q', '--bare', 'origin.git');
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('repoName', () => {
  it('is the folder name without an origin, and stays so after adding an origin on this machine', () => {
    assert.equal(repoName(repo), 'repo');
    git(repo, 'remote', 'add', 'origin', join(dir, 'newcomer', 'origin.git'));
    assert.equal(repoName(repo), 'repo', 'a path origin named "newcomer/origin"');
    for (const local of [`file://${join(dir, 'newcomer', 'origin.git')}`, '../newcomer/origin.git', './a:b/c']) {
      setOrigin(local);
      assert.equal(repoName(repo), 'repo', local);
    }
  });

  it('is owner/name for a hosted origin in https, ssh, git and scp-like form', () => {
    const hosted: Array<[string, string]> = [
      ['https://github.com/acme/api.git', 'acme/api'], ['https://github.com/acme/api', 'acme/api'],
      ['ssh://git@github.com:22/acme/api.git', 'acme/api'], ['git://git.example.test/acme/api.git', 'acme/api'],
      ['git@github.com:acme/api.git', 'acme/api'], ['github.com:acme/web/', 'acme/web'],
    ];
    for (const [url, name] of hosted) {
      setOrigin(url);
      assert.equal(repoName(repo), name, url);
    }
  });
});
