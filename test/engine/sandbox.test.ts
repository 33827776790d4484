// The agent boundary measured from inside (DESIGN §7a): a `command` provider plays a prompt-injected agent under a real
// `svc start`, and the test reads back what it could see. Runs (never skips) wherever bwrap works, and always in CI.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, processesMentioning, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { parsePolicy, PolicyError } from '../../src/engine/policy.ts';

const SECRETS = { GITHUB_TOKEN: 'gh-sekret-4711', SVC_API_TOKEN: 'api-sekret-4712', TRACKERA_API_KEY: 'tra-sekret-4713' };
const FILE_SECRET = 'file-sekret-4714';

/**
 * Looks for everything a hostile agent would: its ancestors' /proc entries (the brief names the test's own pid, an
 * ancestor), every environ and cmdline it can read, ~/.svc, the token file, the other runs, the repository's git
 * config. Writes what it found into the worktree (so the test reads it from the run's diff folder), then leaves a
 * setsid'd process and a double-forked one behind and exits.
 */
const HOSTILE = `#!/bin/sh
cat > /dev/null
ancestor=$(grep -o 'ancestor-[0-9]*' "$SVC_TASK_FILE" | head -1 | cut -d- -f2)
tokenfile=$(grep -o 'tokenfile=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
{
  if [ -e "/proc/$ancestor" ]; then echo "ancestor:visible"; else echo "ancestor:absent"; fi
  cat "/proc/$ancestor/environ" >/dev/null 2>&1 && echo "ancestor-environ:readable" || echo "ancestor-environ:unreadable"
  echo "svc-home:[$(ls -A "$HOME/.svc" 2>/dev/null | tr '\\n' ' ')]"
  (mkdir -p "$HOME/.svc/keys" && echo planted > "$HOME/.svc/keys/planted-by-agent") 2>/dev/null && echo "svc-home:planted"
  echo "token-file:[$(cat "$tokenfile" 2>/dev/null)]"
  echo "runs:[$(ls -A "$(dirname "$(dirname "$(dirname "$SVC_TASK_FILE")")")" 2>/dev/null | tr '\\n' ' ')]"
  echo "run-folder:[$(ls -A "$(dirname "$(dirname "$SVC_TASK_FILE")")" 2>/dev/null | tr '\\n' ' ')]"
  common=$(git rev-parse --path-format=absolute --git-common-dir)
  (echo '# agent was here' >> "$common/config") 2>/dev/null && echo "git-config:written" || echo "git-config:read-only"
  (echo 'exit 0' > "$common/hooks/pre-push") 2>/dev/null && echo "git-hooks:written" || echo "git-hooks:read-only"
  [ -r "$SVC_TASK_FILE" ] && echo "task:readable"
  (echo x > "$SVC_TASK_FILE") 2>/dev/null && echo "task:written" || echo "task:read-only"
  (echo x > "$(dirname "$SVC_QUESTION_FILE")/probe") 2>/dev/null && echo "question-folder:writable"
  rm -f "$(dirname "$SVC_QUESTION_FILE")/probe"
  echo "processes:$(ls /proc | grep -c '^[0-9]')"
} > found.txt
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f" 2>/dev/null | tr '\\0' '\\n'; done > proc-dump.txt
setsid sh -c 'while :; do sleep 1; done' "svc-orphan-$SVC_RUN_ID" &
( sh -c 'while :; do sleep 1; done' "svc-double-$SVC_RUN_ID" & ) &
exit 0
`;


describe('the agent sandbox', { skip: bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)' }, () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let tokenFile: string;

  before(() => {
    repo = makeRepo({ providers: { hostile: HOSTILE } });
    tokenFile = join(repo.root, 'control-token');
    writeFileSync(tokenFile, FILE_SECRET, { mode: 0o600 });
    // Something for ~/.svc to hide besides the signing key svc makes on its first receipt.
    mkdirSync(join(repo.home, '.svc'), { recursive: true });
    writeFileSync(join(repo.home, '.svc', 'marker'), 'under svc home');
    env = { ...process.env, ...GIT_ENV, ...SECRETS, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', SVC_CONTROL_TOKEN_FILE: tokenFile };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
  });
  after(() => repo.cleanup());

  async function start(brief: string, extra: NodeJS.ProcessEnv = {}) {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', brief, '--worktree', '--provider', 'hostile'], {
      cwd: repo.repo, env: { ...env, ...extra },
    });
    const runs = readdirSync(join(repo.repo, '.svc', 'runs'));
    const run = runs.find((r) => readJson(join(repo.repo, '.svc', 'runs', r, 'state.json')).brief === brief)!;
    return { res, run, state: readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')) };
  }

  it('hides svc\'s processes, home, token files and other runs, keeps git metadata read-only, and ends every process', async () => {
    const { res, run, state } = await start(`probe ancestor-${process.pid} tokenfile=${tokenFile}`);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(state.status, 'succeeded');
    const found = readFileSync(join(state.workdir, 'found.txt'), 'utf8').trim().split('\n');
    assert.ok(found.includes('ancestor:absent'), found.join('\n'));
    assert.ok(found.includes('ancestor-environ:unreadable'));
    assert.ok(found.includes('svc-home:[]'), 'nothing under ~/.svc is visible');
    // Its HOME is a private tmpfs: what it writes there is gone with the sandbox and never reaches the real ~/.svc.
    assert.equal(existsSync(join(repo.home, '.svc', 'keys', 'planted-by-agent')), false);
    assert.ok(found.includes('token-file:[]'), 'the token file reads as empty');
    assert.ok(found.includes(`runs:[${run} ]`), 'no other run is visible');
    assert.ok(found.includes('run-folder:[io ]'), 'of its own run, only the protocol files are visible');
    assert.ok(found.includes('git-config:read-only'));
    assert.ok(found.includes('git-hooks:read-only'));
    assert.ok(found.includes('task:readable') && found.includes('task:read-only'));
    assert.ok(found.includes('question-folder:writable'));
    assert.ok(Number(found.find((l) => l.startsWith('processes:'))!.split(':')[1]) < 10, 'only the sandbox\'s processes');
    const dump = readFileSync(join(state.workdir, 'proc-dump.txt'), 'utf8');
    for (const secret of [...Object.values(SECRETS), FILE_SECRET]) assert.equal(dump.includes(secret), false, `${secret} leaked`);
    assert.equal(readFileSync(join(repo.repo, '.git', 'config'), 'utf8').includes('agent was here'), false);
    // Nothing the agent started outlives its sandbox: gone by the time the run has ended, without waiting.
    assert.deepEqual(processesMentioning(`svc-orphan-${run}`), []);
    assert.deepEqual(processesMentioning(`svc-double-${run}`), []);
  });

  it('without a sandbox (SVC_SANDBOX=none at the CLI) warns loudly and still ends setsid and double-forked processes', async () => {
    const { res, run, state } = await start(`unconfined ancestor-${process.pid} tokenfile=${tokenFile}`, { SVC_SANDBOX: 'none' });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /WARNING: the agent runs WITHOUT a sandbox \(SVC_SANDBOX=none\)/);
    assert.equal(state.status, 'succeeded');
    assert.ok(readFileSync(join(state.workdir, 'found.txt'), 'utf8').includes('ancestor:visible'), 'really unconfined');
    assert.deepEqual(processesMentioning(`svc-orphan-${run}`), []);
    assert.deepEqual(processesMentioning(`svc-double-${run}`), []);
  });
});

describe('when bwrap cannot run', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: { fake: '#!/bin/sh\ncat > /dev/null\necho fixed >> a.txt\n' } });
    // A bwrap that fails the way a host without user namespaces does.
    const fake = join(repo.root, 'fake-bwrap');
    mkdirSync(fake);
    writeFileSync(join(fake, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to creating new namespace" >&2\nexit 1\n');
    chmodSync(join(fake, 'bwrap'), 0o755);
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', PATH: `${fake}:${process.env.PATH}` };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
  });
  after(() => repo.cleanup());

  const start = (extra: NodeJS.ProcessEnv) => runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--provider', 'fake'], {
    cwd: repo.repo, env: { ...env, ...extra },
  });
  const runCount = () => (existsSync(join(repo.repo, '.svc', 'runs')) ? readdirSync(join(repo.repo, '.svc', 'runs')).length : 0);

  for (const origin of ['control', 'chata', 'jobs']) {
    it(`refuses a run started by ${origin}, names the package and the server's opt-out, even with SVC_SANDBOX=none`,
      async () => {
        const before = runCount();
        const res = await start({ SVC_ORIGIN: origin, SVC_SANDBOX: 'none' });
        assert.equal(res.code, 1);
        assert.match(res.stderr, /bubblewrap/);
        assert.match(res.stderr, /SVC_SERVER_SANDBOX=none in the environment of the server itself/);
        assert.doesNotMatch(res.stderr, /SVC_SANDBOX=none|policy\.json/);
        assert.equal(runCount(), before, 'no run was created');
      });
  }

  it('refuses a CLI run too, naming SVC_SANDBOX=none as the way to go on', async () => {
    const res = await start({});
    assert.equal(res.code, 1);
    assert.match(res.stderr, /No permissions to creating new namespace/);
    assert.match(res.stderr, /SVC_SANDBOX=none/);
  });

  it('refuses an SVC_SANDBOX value it does not know as a bad setting (exit 2)', async () => {
    const res = await start({ SVC_SANDBOX: 'off' });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /SVC_SANDBOX must be "bwrap" or "none"/);
  });

  it('never lets a project policy switch the sandbox off for a server-started run: it still needs bwrap', async () => {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ sandbox: 'none' }));
    try {
      const before = runCount();
      const res = await start({ SVC_ORIGIN: 'control' });
      assert.equal(res.code, 1);
      assert.match(res.stderr, /No permissions to creating new namespace/);
      assert.equal(runCount(), before, 'no run was created');
      // A CLI run takes the repository's word only once the person trusted that exact file (DESIGN §7a).
      const untrusted = await start({});
      assert.equal(untrusted.code, 1, untrusted.stderr);
      assert.match(untrusted.stderr, /^svc start: Refusing to start: .*\.svc\/policy\.json asks for settings only the /m);
      assert.match(untrusted.stderr, /\(sandbox "none"\), and the file is not trusted\. .*`svc trust`/);
      assert.match(untrusted.stderr, /or set SVC_SANDBOX=none yourself$/m);
      assert.equal(runCount(), before, 'no run was created');
      const own = await start({ SVC_SANDBOX: 'none' });
      assert.equal(own.code, 0, own.stderr);
      const trusted = await runChild(process.execPath, [CLI, 'trust'], { cwd: repo.repo, env });
      assert.equal(trusted.code, 0, trusted.stderr);
      assert.match(trusted.stdout, /Trusted .*\.svc\/policy\.json .*\n {2}allowed: sandbox "none"\n/);
      const cli = await start({});
      assert.equal(cli.code, 0, cli.stderr);
      assert.match(cli.stderr, /WITHOUT a sandbox \(the project policy says "sandbox": "none"\)/);
      writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ sandbox: 'none', max_usd: 1 }));
      const changed = await start({});
      assert.equal(changed.code, 1, changed.stderr);
      assert.match(changed.stderr, /the file is changed since you trusted it/);
    } finally {
      writeFileSync(join(repo.repo, '.svc', 'policy.json'), '{}');
    }
  });

  it('runs a server-started run unconfined only when the server itself says SVC_SERVER_SANDBOX=none', async () => {
    const res = await start({ SVC_ORIGIN: 'control', SVC_SERVER_SANDBOX: 'none' });
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /WITHOUT a sandbox \(SVC_SERVER_SANDBOX=none\)/);
  });
});

describe('policy.json sandbox', () => {
  it('accepts "bwrap" and "none", defaults to null (bwrap) and refuses anything else', () => {
    assert.equal(parsePolicy({}).sandbox, null);
    assert.equal(parsePolicy({ sandbox: 'bwrap' }).sandbox, 'bwrap');
    assert.equal(parsePolicy({ sandbox: 'none' }).sandbox, 'none');
    assert.throws(() => parsePolicy({ sandbox: 'off' }), PolicyError);
    assert.throws(() => parsePolicy({ sandbox: false }), PolicyError);
  });
});
