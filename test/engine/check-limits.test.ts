// A check runs code the agent wrote (its tests, its scripts): the limits svc watches while the agent runs hold for
// it too, so a check cannot fill the host's disk where the agent itself could not.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';

/** Leaves the check it runs: a script that fills the worktree, then waits. */
const WRITES_ITS_CHECK = `#!/bin/sh
cat > /dev/null
printf '#!/bin/sh\\nfor i in $(seq 1 40); do head -c 1048576 /dev/zero > "fill-$i.bin"; done\\nsleep 30\\n' > check.sh
chmod +x check.sh
echo fixed >> a.txt
`;

describe('the limits of a check', () => {
  let repo: TestRepo;

  before(() => {
    repo = makeRepo({
      providers: { writes: WRITES_ITS_CHECK },
      policy: { limits: { disk_mb: 8 }, checks: [{ name: 'fills', run: ['sh', 'check.sh'] }] },
    });
  });
  after(() => repo.cleanup());

  it('ends a check whose worktree grows past limits.disk_mb, failing it, and its log says why', async () => {
    const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
    const started = await runChild(process.execPath,
      [CLI, 'start', '--brief', 'write a check', '--provider', 'writes', '--worktree'], { cwd: repo.repo, env });
    const { run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { run: string };
    const dir = join(repo.repo, '.svc', 'runs', run);
    const state = readJson(join(dir, 'state.json'));
    assert.equal(state.status, 'failed');
    assert.equal(state.failed_check, 'fills');
    const log = readFileSync(join(dir, 'artifacts', 'checks', 'fills.log'), 'utf8');
    assert.match(log, /svc ended the check: the worktree and the question and answer folders grew by more than 8 MiB/);
  });
});
