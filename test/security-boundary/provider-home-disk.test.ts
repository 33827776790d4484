// limits.disk_mb holds for the provider's own folders too (DESIGN §7a "It ends"), black-box: a real `svc start` run
// whose provider is a stand-in named `claude` on PATH that fills the folders its home binds from the host's disk (its
// kept session state and the invocation's fresh ~/.claude), neither of them HOME's tmpfs nor the worktree; and one
// whose `command` provider fills a folder declared writable for it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, svcEnv, AGENT_STATE, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

/** Runs `provider` in a worktree of `repo` (svc start, in the foreground), checks that the disk limit of 8 MiB failed
 * the run, and gives its folder. */
async function runEndedByDiskLimit(repo: TestRepo, env: NodeJS.ProcessEnv, provider: string): Promise<string> {
  const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'fill the disk', '--worktree',
    '--provider', provider], { cwd: repo.repo, env });
  const line = res.stdout.trim().split('\n')[0] ?? '';
  assert.ok(line.startsWith('{'), `svc start printed no run: ${res.stderr}`);
  const dir = join(repo.repo, '.svc', 'runs', (JSON.parse(line) as { run: string }).run);
  const state = readJson(join(dir, 'state.json')) as { status: string; error: string };
  assert.equal(state.status, 'failed', res.stderr);
  assert.match(state.error, /the provider's folders grew by more than 8 MiB.*limits\.disk_mb/);
  return dir;
}

/** 6 MiB in the kept transcripts folder and 6 MiB in the fresh ~/.claude: 12 MiB together, past a disk_mb of 8. */
const FILLER = `#!/bin/sh
[ "$1" = --version ] && { echo '2.1.330 (Claude Code)'; exit 0; }
cat > /dev/null
mkdir -p "$HOME/.claude/projects/p" "$HOME/.claude/cache"
for i in 1 2 3 4 5 6; do
  head -c 1048576 /dev/zero > "$HOME/.claude/projects/p/kept-$i.bin"
  head -c 1048576 /dev/zero > "$HOME/.claude/cache/fresh-$i.bin"
done
sleep 20
echo fixed >> a.txt
`;

describe('the disk limit of an agent with a provider home', {
  skip: bwrapWorks ? false : 'bwrap cannot run on this host',
}, () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: {}, policy: { limits: { disk_mb: 8 } } });
    const bin = join(repo.root, 'clis');
    mkdirSync(bin);
    writeFileSync(join(bin, 'claude'), FILLER);
    chmodSync(join(bin, 'claude'), 0o755);
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH}` };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
    delete env.SVC_PROVIDER_HOME_SCOPE;
  });
  after(() => repo.cleanup());

  it('ends an agent that writes past limits.disk_mb into its kept session folder and its fresh ~/.claude', async () => {
    const dir = await runEndedByDiskLimit(repo, env, 'claude');
    assert.ok(existsSync(join(dir, 'artifacts', 'receipt.json')));
  });
});

/** 12 MiB into the folder the operator declared writable for it (fixtures.ts grantAgentState), past a disk_mb of 8. */
const DECLARED_FILLER = `#!/bin/sh
cat > /dev/null
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do head -c 1048576 /dev/zero > "$HOME/${AGENT_STATE}/fill-$i.bin"; done
sleep 20
echo fixed >> a.txt
`;

describe('the disk limit of an agent with a folder declared writable for its command provider', {
  skip: bwrapWorks ? false : 'bwrap cannot run on this host',
}, () => {
  let repo: TestRepo;
  before(() => {
    repo = makeRepo({ providers: { filler: DECLARED_FILLER }, policy: { limits: { disk_mb: 8 } } });
  });
  after(() => repo.cleanup());

  // The folder is a host folder the agent writes: an agent filling it fills the host's disk as one filling its tree.
  it('ends an agent that writes past limits.disk_mb into that folder', async () => {
    const env = svcEnv(repo);
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
    await runEndedByDiskLimit(repo, env, 'filler');
  });
});
