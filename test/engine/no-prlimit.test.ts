// A host without util-linux's prlimit (src/spawn/limits.ts): a sandboxed run refuses to start, naming prlimit and its
// package, rather than hold its agent with no kernel limit at all; and no sandbox is ever built without it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_STATE, CLI, repoForTests } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { withoutPrlimit, withoutPrlimitSkip } from '../helpers/without-prlimit.ts';

// The agent keeps its own limits where the test can read them (a folder the operator made writable).
const LIMITS_SCRIPT = `#!/bin/sh
cat > /dev/null
cat /proc/self/limits > "$HOME/${AGENT_STATE}/limits"
echo "fixed" >> a.txt
`;

const skip = !bwrapWorks ? 'bwrap cannot run here' : withoutPrlimitSkip;

describe('a sandboxed run on a host without prlimit', { skip }, () => {
  const repo = repoForTests({ providers: { fake: LIMITS_SCRIPT } });

  async function start(env: NodeJS.ProcessEnv) {
    const [command, ...args] = withoutPrlimit([process.execPath, CLI, 'start', '--brief', 'fix', '--provider', 'fake']);
    return runChild(command!, args, { cwd: repo.repo, env: { ...repo.env, ...env } });
  }

  for (const origin of [{}, { SVC_ORIGIN: 'webhook' }]) {
    const who = origin.SVC_ORIGIN ? 'a server' : 'a person at the CLI';
    it(`refuses a run ${who} started, naming prlimit and util-linux, and its agent never runs`, async () => {
      const res = await start(origin);
      assert.equal(res.code, 1, `${res.stdout}\n${res.stderr}`);
      assert.match(res.stderr, /Refusing to start: agents run in a bubblewrap sandbox and prlimit is not in \/usr/);
      assert.match(res.stderr, /apt-get install util-linux/);
      assert.match(res.stderr, new RegExp(origin.SVC_ORIGIN ? 'SVC_SERVER_SANDBOX=none' : 'SVC_SANDBOX=none'));
      assert.equal(existsSync(join(repo.home, AGENT_STATE, 'limits')), false, 'the agent ran');
      // Refused before the run was made, as a missing bwrap is.
      assert.deepEqual(readdirSync(join(repo.repo, '.svc')).filter((f) => f === 'runs'), []);
    });
  }

  it('takes no cached "works" from a host that had prlimit: the probe looks again', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'fix', '--provider', 'fake', '--worktree'],
      { cwd: repo.repo, env: repo.env });
    assert.equal(res.code, 0, res.stderr);
    assert.match(readFileOf(join(repo.home, AGENT_STATE, 'limits')), /^Max processes\s+1024\s+1024/m);
    const refused = await start({});
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /prlimit is not in .*, so no sandbox would get its kernel limits/);
  });

  it('names both packages when neither bwrap nor prlimit is there, as svc doctor does', async () => {
    const script = join(repo.root, 'refuse.ts');
    const src = JSON.stringify(new URL('../../src/spawn/sandbox-mode.ts', import.meta.url).href);
    writeFileSync(script, `
import { resolveSandbox } from ${src};
try {
  resolveSandbox(null, { HOME: process.env.HOME, PATH: '/nothing-here', SVC_ORIGIN: 'webhook' });
  process.stdout.write('started');
} catch (err) {
  process.stdout.write(err instanceof Error ? err.message : 'not an error');
}
`);
    const [command, ...args] = withoutPrlimit([process.execPath, script]);
    const res = await runChild(command!, args, { env: repo.env });
    assert.match(res.stdout, /apt-get install bubblewrap; and install the Debian package "util-linux"/, res.stderr);
  });

  it('builds no sandbox without its limits even when the probe is passed by (a plan made earlier)', async () => {
    const script = join(repo.root, 'build.ts');
    const src = (file: string) => JSON.stringify(new URL(`../../src/spawn/${file}`, import.meta.url).href);
    writeFileSync(script, `
import { bwrapArgv } from ${src('bwrap-argv.ts')};
import { DEFAULT_LIMITS, PrlimitMissingError } from ${src('limits.ts')};
const plan = { readable: [], writable: [], protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
  home: null, cwd: '/', limits: DEFAULT_LIMITS, network: 'none' as const };
try {
  process.stdout.write(JSON.stringify(bwrapArgv('bwrap', plan, ['true'])));
} catch (err) {
  process.stdout.write(err instanceof PrlimitMissingError ? 'refused: ' + err.code : String(err));
}
`);
    const [command, ...args] = withoutPrlimit([process.execPath, script]);
    const res = await runChild(command!, args);
    assert.equal(res.stdout, 'refused: unavailable', res.stderr);
  });
});

function readFileOf(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}
