// The checkout claim (src/engine/checkout-claim.ts) in a checkout whose git directory this user cannot write: a
// read-only mount, made here with bwrap around a process that takes the claim.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, EDIT_SCRIPT, GIT_ENV, makeRepo } from './fixtures.ts';

const CLAIM_MODULE = fileURLToPath(new URL('../../src/engine/checkout-claim.ts', import.meta.url));
const hasBwrap = spawnSync('bwrap', ['--dev-bind', '/', '/', 'true']).status === 0;

describe('the checkout claim', () => {
  it('refuses a read-only git directory with a typed error saying what to do', { skip: !hasBwrap }, () => {
    const repo = mkdtempSync(join(tmpdir(), 'svc-claim-ro-'));
    try {
      assert.equal(spawnSync('git', ['init', '-q', repo]).status, 0);
      const gitDir = join(repo, '.git');
      const script = `import(${JSON.stringify(CLAIM_MODULE)}).then((m) => m.claimCheckout(${JSON.stringify(gitDir)}))` +
        '.then(() => console.log("claimed"), (e) => console.log(JSON.stringify([e.name, e.code, e.message])))';
      const res = spawnSync('bwrap', ['--dev-bind', '/', '/', '--ro-bind', gitDir, gitDir,
        process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
      assert.equal(res.status, 0, res.stderr);
      const [name, code, message] = JSON.parse(res.stdout) as string[];
      assert.deepEqual([name, code], ['BadInputError', 'bad_input']);
      assert.equal(message, `Cannot claim the checkout: its git directory "${gitDir}" is not writable here (EROFS); ` +
        'svc start writes its claim and its commits there, so run it as a user who can write the checkout, where it ' +
        'is mounted writable');
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });

  // The first svc start in a checkout writes .git/info/exclude before it takes the claim.
  it('refuses the first svc start in a read-only git directory with the same typed error', { skip: !hasBwrap }, () => {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    try {
      const gitDir = join(repo.repo, '.git');
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_SANDBOX: 'none' };
      const res = spawnSync('bwrap', ['--dev-bind', '/', '/', '--ro-bind', gitDir, gitDir,
        process.execPath, CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
      { cwd: repo.repo, env, encoding: 'utf8' });
      assert.equal(res.status, 2, res.stderr);
      assert.match(res.stderr, /Cannot claim the checkout: its git directory ".*" is not writable here \(EROFS\)/);
    } finally {
      repo.cleanup();
    }
  });

  // git prints each git directory on its own line, so a line break in one reads as two paths: the second, relative,
  // would be the repository's git directory inside the user's work tree, where svc would write info/exclude.
  it('refuses a linked worktree of a repository whose path holds a line break, writing nothing', () => {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    try {
      const main = join(repo.root, 'a\nb');
      renameSync(repo.repo, main);
      const tree = join(repo.root, 'tree');
      assert.equal(spawnSync('git', ['worktree', 'add', '-q', tree], { cwd: main }).status, 0);
      mkdirSync(join(tree, '.svc'));
      copyFileSync(join(main, '.svc', 'config.json'), join(tree, '.svc', 'config.json'));
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_SANDBOX: 'none',
        SVC_CONTROL_URL: 'http://127.0.0.1:9' };
      const res = spawnSync(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
        { cwd: tree, env, encoding: 'utf8' });
      assert.equal(res.status, 1, res.stderr);
      assert.match(res.stderr, /a git directory path holds a line break/);
      assert.equal(existsSync(join(tree, 'b')), false, 'nothing was written in the work tree');
      assert.equal(existsSync(join(tree, '.svc', 'runs')), false, 'no run folder was made');
    } finally {
      repo.cleanup();
    }
  });
});
