// A branch svc pushes carries whatever the run committed, gitlinks included: the run's own receipt must list a
// submodule the agent moved, not only the files around it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';

const BEFORE = '2222222222222222222222222222222222222222';

/**
 * Edits a file and makes the submodule's folder a repository of its own: svc's `git add -A` then records that
 * repository's commit as the gitlink, so the branch carries a submodule move the agent chose.
 */
const MOVES_SUBMODULE = `#!/bin/sh
cat > /dev/null
echo "fixed" >> a.txt
cd vendor/lib && git init -q && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m moved
`;

describe('the receipt of a run that moves a submodule', () => {
  let repo: TestRepo;

  before(() => {
    repo = makeRepo({ providers: { mover: MOVES_SUBMODULE } });
    const git = (args: string[]) => execFileSync('git', args, { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });
    mkdirSync(join(repo.repo, 'vendor', 'lib'), { recursive: true });
    git(['update-index', '--add', '--cacheinfo', `160000,${BEFORE},vendor/lib`]);
    writeFileSync(join(repo.repo, '.gitmodules'), '[submodule "lib"]\n\tpath = vendor/lib\n\turl = ./lib.git\n');
    git(['add', '.gitmodules']);
    git(['commit', '-qm', 'add a submodule']);
  });
  after(() => repo.cleanup());

  it('lists the gitlink move among the paths it signs', async () => {
    const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
    const r = await runChild(process.execPath, [CLI, 'start', '--brief', 'move it', '--provider', 'mover', '--worktree'],
      { cwd: repo.repo, env });
    const { run } = JSON.parse(r.stdout.trim().split('\n')[0]!) as { run: string };
    const dir = join(repo.repo, '.svc', 'runs', run);
    const state = readJson(join(dir, 'state.json'));
    const tree = execFileSync('git', ['ls-tree', state.head_sha, 'vendor/lib'], { cwd: repo.repo, encoding: 'utf8' });
    // Only if the run's commit carries the move does the receipt have anything to say about it.
    assert.match(tree, /^160000 commit [0-9a-f]{40}\tvendor\/lib$/m, `no gitlink: ${state.status} ${state.error}`);
    assert.ok(!tree.includes(BEFORE), `the branch carries a moved gitlink: ${tree}`);
    const receipt = readJson(join(dir, 'artifacts', 'receipt.json'));
    assert.deepEqual([...receipt.diff.paths].sort(), ['a.txt', 'vendor/lib']);
  });
});
