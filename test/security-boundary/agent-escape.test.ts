// The agent stays in (DESIGN §7a), black-box: real `svc start` runs whose `command` provider plays a hostile
// agent, each trying one way out. Run as whoever runs the tests (root in CI) and, when that is root, again as an
// unprivileged user (`setpriv` to nobody), since the kernel treats the two differently (capabilities, RLIMIT_NPROC).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync }
  from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { letNobodyReach } from '../helpers/nobody-reach.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

/**
 * Plants an embedded repository whose config names programs (a clean filter that would copy svc's keys out, smudge,
 * textconv, external diff, fsmonitor, a hook), the way finding 1 did. Each program, wherever it runs, leaves a marker
 * in the loot folder (a host folder outside /tmp, so an unsandboxed run would reach it) and in the worktree (so a run
 * inside svc's git sandbox would show up in the commit).
 */
const EMBEDDED_FILTER = `#!/bin/sh
cat > /dev/null
loot=$(grep -o 'LOOT=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
wt="$PWD"
git init -q sub
echo data > sub/file.txt
git -C sub add -A && git -C sub -c user.email=a@b -c user.name=a commit -qm x
mark() { echo "sh -c 'echo ran > $loot/$1; echo ran > $wt/$1-in-worktree; cat'"; }
git -C sub config filter.evil.clean "$(mark clean)"
git -C sub config filter.evil.smudge "$(mark smudge)"
git -C sub config filter.evil.process "$(mark process)"
git -C sub config core.fsmonitor "$(mark fsmonitor)"
git -C sub config diff.evil.textconv "$(mark textconv)"
git -C sub config diff.external "$(mark extdiff)"
git -C sub config core.hooksPath "$wt/sub/hooks"
mkdir -p sub/hooks sub/.git/hooks
for h in pre-commit post-commit reference-transaction post-index-change; do
  printf '#!/bin/sh\necho ran > %s/hook-%s\n' "$loot" "$h" | tee "sub/hooks/$h" > "sub/.git/hooks/$h"
  chmod +x "sub/hooks/$h" "sub/.git/hooks/$h"
done
echo '* filter=evil diff=evil' > sub/.gitattributes
echo more >> sub/file.txt
printf '[submodule "sub"]\n\tpath = sub\n\turl = ./sub\n\tupdate = !sh -c "echo ran > %s/update"\n' "$loot" > .gitmodules
echo fixed >> a.txt
exit 0
`;

/** Tries everything root could do to its own mounts, and reports each result into found.txt. */
const PRIVILEGES = `#!/bin/sh
cat > /dev/null
common=$(git rev-parse --path-format=absolute --git-common-dir)
{
  grep '^CapEff:' /proc/self/status
  umount -l /usr 2>/dev/null && echo "umount:worked" || echo "umount:failed"
  mount -o remount,rw "$common" 2>/dev/null && echo "remount:worked" || echo "remount:failed"
  mount -t tmpfs none /usr/share 2>/dev/null && echo "mount:worked" || echo "mount:failed"
  unshare -U -r true 2>/dev/null && echo "userns:worked" || echo "userns:failed"
  (echo x >> "$common/config") 2>/dev/null && echo "git-config:written" || echo "git-config:read-only"
  (echo x > /planted) 2>/dev/null && echo "root:written" || echo "root:read-only"
  (exec 3<>/proc/1/mem) 2>/dev/null && echo "init-mem:opened" || echo "init-mem:refused"
  for p in /proc/[0-9]*; do
    nproc=$(sed -n 's/^Max processes *\\([0-9a-z]*\\).*/\\1/p' "$p/limits" 2>/dev/null)
    echo "nproc:\${p#/proc/}:$nproc:$(readlink "$p/exe")"
  done
} > found.txt
`;

/** Looks for credentials the old denylist view forgot, and for a host folder nobody named. */
const LOOKS_AROUND = `#!/bin/sh
cat > /dev/null
elsewhere=$(grep -o 'ELSEWHERE=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
realhome=$(grep -o 'REALHOME=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
{
  echo "root:[$(ls -A / | tr '\\n' ' ')]"
  echo "home:[$(ls -A "$HOME" | tr '\\n' ' ')]"
  for f in "$realhome/.ssh/id_ed25519" "$realhome/.git-credentials" "$realhome/.config/gh/hosts.yml" \\
    "$elsewhere/control.db" "$elsewhere/api-token" "$elsewhere/unnamed/notes" /etc/shadow /etc/npmrc; do
    cat "$f" 2>/dev/null
  done
  ls -A "$elsewhere" 2>/dev/null
  ls /var /run /srv /opt 2>/dev/null
} > found.txt
exit 0
`;

/** Starts more processes than the policy allows and records how many it got. */
const FORKS = `#!/bin/sh
cat > /dev/null
n=0
for i in $(seq 1 120); do sleep 3 & n=$((n+1)); done 2>/dev/null
echo "$n" > started.txt
wait
`;

const SLEEPS = '#!/bin/sh\ncat > /dev/null\necho started > started.txt\nsleep 60\n';
const BIG_FILE = '#!/bin/sh\ncat > /dev/null\nhead -c 3145728 /dev/zero > big.bin\necho "exit $?" > wrote.txt\n';
const MEMORY = `#!/bin/sh
cat > /dev/null
/usr/bin/python3 -c "a = bytearray(400 * 1024 * 1024); print('allocated')" > memory.txt 2>&1
echo "exit $?" >> memory.txt
`;
const DISK = `#!/bin/sh
cat > /dev/null
for i in $(seq 1 40); do head -c 1048576 /dev/zero > "fill-$i.bin"; done
sleep 30
`;
const HUGE_DIFF = `#!/bin/sh
cat > /dev/null
mkdir many
i=0; while [ $i -lt 3000 ]; do echo "$i" > "many/f$i.txt"; i=$((i+1)); done
head -c 36000000 /dev/urandom > large.bin
`;

/** Asks, waits for its answer in $SVC_ANSWER_FILE, uses it, removes it to say it read it, and goes on. */
const WAITS_FOR_ANSWER = `#!/bin/sh
cat > /dev/null
echo "invoked" >> "$HOME/agent-state/invocations-$SVC_RUN_ID"
echo "Which colour?" > "$SVC_QUESTION_FILE"
while [ ! -f "$SVC_ANSWER_FILE" ]; do sleep 0.1; done
cat "$SVC_ANSWER_FILE" >> a.txt
rm "$SVC_ANSWER_FILE"
`;

/** Exits after asking, as real CLIs do; when invoked again, finds the answer at $SVC_ANSWER_FILE. */
const ASKS_AND_EXITS = `#!/bin/sh
cat > /dev/null
echo "invoked" >> "$HOME/agent-state/invocations-$SVC_RUN_ID"
if [ -f "$SVC_ANSWER_FILE" ]; then cat "$SVC_ANSWER_FILE" >> a.txt; exit 0; fi
echo "Which colour?" > "$SVC_QUESTION_FILE"
`;

/** Never satisfied: asks on every invocation. */
const ALWAYS_ASKS = `#!/bin/sh
cat > /dev/null
echo "invoked" >> "$HOME/agent-state/invocations-$SVC_RUN_ID"
echo "And now?" > "$SVC_QUESTION_FILE"
`;

/** Tries to read and replace its run's key (docs/control-data.md, "Each run's own runner"), in its run folder. */
const RUN_KEY = `#!/bin/sh
cat > /dev/null
repo=$(dirname "$(git rev-parse --path-format=absolute --git-common-dir)")
key="$repo/.svc/runs/$SVC_RUN_ID/run-key"
{
  echo "read:[$(cat "$key" 2>/dev/null)]"
  echo forged > "$key" 2>/dev/null
  mv -f "$key" "$key.old" 2>/dev/null && echo forged > "$key" 2>/dev/null
} > "$HOME/agent-state/runkey-$SVC_RUN_ID"
echo fixed >> a.txt
`;

const PROVIDERS = {
  embedded: EMBEDDED_FILTER, privileges: PRIVILEGES, looks: LOOKS_AROUND, forks: FORKS, sleeps: SLEEPS,
  bigfile: BIG_FILE, memory: MEMORY, disk: DISK, hugediff: HUGE_DIFF, waits: WAITS_FOR_ANSWER, asks: ASKS_AND_EXITS,
  always: ALWAYS_ASKS, runkey: RUN_KEY,
};

interface Started {
  code: number | null;
  stderr: string;
  run: string;
  state: any;
}

/** One pass of the suite, as the current user or (as root only) as nobody. */
function suite(asNobody: boolean): void {
  let repo: TestRepo;
  let elsewhere: string;
  let env: NodeJS.ProcessEnv;

  before(() => {
    // The checkout may sit in a folder only root may pass (a `mktemp -d` clone): let nobody reach its CLI.
    if (asNobody) letNobodyReach(CLI);
    repo = makeRepo({ providers: PROVIDERS, policy: { checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] } });
    // A folder outside /tmp (the sandbox's /tmp is private anyway) that no setting names except two: the view must
    // not show it because it was never mounted.
    elsewhere = mkdtempSync('/var/tmp/svc-elsewhere-');
    mkdirSync(join(elsewhere, 'unnamed'));
    writeFileSync(join(elsewhere, 'unnamed', 'notes'), 'ELSEWHERE-SECRET-1');
    writeFileSync(join(elsewhere, 'control.db'), 'ELSEWHERE-SECRET-2');
    writeFileSync(join(elsewhere, 'api-token'), 'ELSEWHERE-SECRET-3');
    for (const [path, text] of [['.ssh/id_ed25519', 'HOME-SECRET-1'], ['.git-credentials', 'HOME-SECRET-2'],
      ['.config/gh/hosts.yml', 'HOME-SECRET-3'], ['.svc/keys/marker.pem', 'HOME-SECRET-4']] as const) {
      mkdirSync(join(repo.home, path, '..'), { recursive: true });
      writeFileSync(join(repo.home, path), text!);
    }
    mkdirSync(join(elsewhere, 'loot'));
    chmodSync(join(elsewhere, 'loot'), 0o777);
    env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', SVC_CONTROL_DB: join(elsewhere, 'control.db'),
      SVC_API_TOKEN_FILE: join(elsewhere, 'api-token'),
    };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
    if (asNobody) {
      execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, repo.root, elsewhere]);
      // git refuses a repository owned by someone else; as nobody, it is nobody's.
    }
  });
  after(() => {
    repo.cleanup();
    rmSync(elsewhere, { recursive: true, force: true });
  });

  function setPolicy(policy: unknown): void {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify(policy));
    if (asNobody) execFileSync('chown', [`${NOBODY}:${NOBODY}`, join(repo.repo, '.svc', 'policy.json')]);
  }

  /** The svc CLI, as nobody in that pass. */
  function cli(argv: string[]) {
    return asNobody
      ? runChild('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, CLI,
        ...argv], { cwd: repo.repo, env })
      : runChild(process.execPath, [CLI, ...argv], { cwd: repo.repo, env });
  }

  /** Runs `svc start` and returns the run's final state. */
  async function start(provider: string, brief: string, extra: string[] = ['--worktree']): Promise<Started> {
    const res = await cli(['start', '--brief', brief, '--provider', provider, ...extra]);
    const line = res.stdout.trim().split('\n')[0] ?? '';
    assert.ok(line.startsWith('{'), `svc start printed no run: ${res.stderr}`);
    const { run } = JSON.parse(line) as { run: string };
    return { code: res.code, stderr: res.stderr, run, state: readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')) };
  }

  const artifact = (s: Started, name: string) => join(repo.repo, '.svc', 'runs', s.run, 'artifacts', name);
  const receiptOf = (s: Started) => JSON.parse(readFileSync(artifact(s, 'receipt.json'), 'utf8'));

  it('runs nothing an embedded repository configures: filters, textconv, fsmonitor and hooks never fire', async () => {
    const loot = join(elsewhere, 'loot');
    const s = await start('embedded', `plant LOOT=${loot}`);
    assert.equal(s.code, 0, s.stderr);
    assert.equal(s.state.status, 'succeeded');
    assert.deepEqual(readdirSync(loot), [], 'nothing the agent planted ran on the host');
    const files = receiptOf(s).diff.paths as string[];
    assert.deepEqual(files.filter((f) => f.includes('in-worktree')), [], 'nor inside svc\'s git sandbox');
    // svc committed the work, but not the embedded repository (a commit nobody could fetch), and said so.
    assert.ok(files.includes('a.txt'), files.join(','));
    assert.equal(files.some((f) => f === 'sub' || f.startsWith('sub/')), false, files.join(','));
    const events = readFileSync(join(repo.repo, '.svc', 'runs', s.run, 'events.jsonl'), 'utf8');
    assert.match(events, /embedded repository.*sub/);
  });

  it('keeps no capability and no way past its limits: mounts, a user namespace and its init\'s memory all fail',
    async () => {
    const s = await start('privileges', 'try root');
    assert.equal(s.code, 0, s.stderr);
    const found = readFileSync(join(s.state.workdir, 'found.txt'), 'utf8');
    assert.match(found, /^CapEff:\s*0+$/m);
    for (const line of ['umount:failed', 'remount:failed', 'mount:failed', 'userns:failed', 'git-config:read-only',
      'root:read-only', 'init-mem:refused']) {
      assert.ok(found.includes(line), `${line} in\n${found}`);
    }
    // Every process the agent can see carries the process limit: its own, the lifeline's watcher (bwrap's init, which
    // carries none, is masked; the gate's port program has ended). One gone before its limits were read is left out.
    const seen = [...found.matchAll(/^nproc:(\d+):(\w*):(.*)$/gm)].filter((m) => m[2] !== '');
    assert.ok(seen.length >= 2 && !seen.some((m) => m[1] === '1'), found);
    for (const [line, , nproc] of seen) assert.equal(nproc, '1024', line);
  });

  it('sees only the allowlist: no credential in HOME, no database or token file, no host folder nobody named', async () => {
    const s = await start('looks', `look ELSEWHERE=${elsewhere} REALHOME=${repo.home}`);
    assert.equal(s.code, 0, s.stderr);
    const found = readFileSync(join(s.state.workdir, 'found.txt'), 'utf8');
    assert.doesNotMatch(found, /SECRET/);
    assert.doesNotMatch(found, /root:\*|root:\$/, '/etc/shadow is not there');
    const root = /^root:\[(.*)\]$/m.exec(found)?.[1]?.trim().split(' ') ?? [];
    // Folders on PATH (and so their parents) may show; these are simply not there (unless a PATH folder lies under
    // one: a checkout under /var puts its node_modules/.bin there). Nothing of the gate's is bound in at /run.
    const pathRoots = new Set((env.PATH ?? '').split(':').map((dir) => dir.split('/')[1]));
    for (const entry of ['var', 'run', 'srv', 'boot', 'mnt', 'media', 'sys'].filter((e) => !pathRoots.has(e))) {
      assert.equal(root.includes(entry), false, `/${entry} is not mounted: ${root.join(' ')}`);
    }
    assert.match(found, /^home:\[agent-state \]$/m, 'HOME holds only the provider\'s declared folder');
  });

  it('can neither read nor replace its run key, in a worktree or in the checkout itself', async () => {
    for (const extra of [['--worktree'], []]) {
      const s = await start('runkey', 'take the key', extra);
      assert.equal(s.code, 0, s.stderr);
      const found = readFileSync(join(repo.home, 'agent-state', `runkey-${s.run}`), 'utf8');
      assert.match(found, /^read:\[\]$/m, `${extra.join(' ')}: ${found}`);
      // What it wrote at that path (a folder under its private /tmp, or nothing) never reached the run folder.
      const key = readFileSync(join(repo.repo, '.svc', 'runs', s.run, 'run-key'), 'utf8');
      assert.match(key, /^[A-Za-z0-9_-]{43}\n$/);
      assert.equal(existsSync(join(repo.repo, '.svc', 'runs', s.run, 'run-key.old')), false);
    }
  });

  it('ends an agent that starts more processes than limits.processes allows, and still issues a receipt', async () => {
    setPolicy({ limits: { processes: 40 }, checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    try {
      const s = await start('forks', 'fork a lot');
      const started = existsSync(join(s.state.workdir, 'started.txt'))
        ? Number(readFileSync(join(s.state.workdir, 'started.txt'), 'utf8')) : null;
      // As root the kernel does not apply RLIMIT_NPROC, so svc's watchdog ends the sandbox; as anyone else the
      // kernel refuses the forks. Either way no more than the limit ran at once.
      if (asNobody) assert.ok(started === null || started < 120, `started ${started}`);
      else {
        assert.equal(s.state.status, 'failed');
        assert.match(s.state.error, /more than 40 processes.*limits\.processes/);
      }
      assert.equal(receiptOf(s).verdict, 'not_verified');
    } finally {
      setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    }
  });

  it('ends an agent at limits.provider_timeout_s, runs the checks and issues a not_verified receipt', async () => {
    setPolicy({ limits: { provider_timeout_s: 2 }, checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    try {
      const s = await start('sleeps', 'sleep long');
      assert.equal(s.state.status, 'failed');
      assert.match(s.state.error, /still running after 2 s.*limits\.provider_timeout_s/);
      const receipt = receiptOf(s);
      assert.equal(receipt.verdict, 'not_verified');
      assert.deepEqual(receipt.checks.map((c: { name: string }) => c.name), ['exists'], 'the checks still ran');
    } finally {
      setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    }
  });

  it('caps the size of a file (limits.file_mb) and the memory of a process (limits.memory_mb)', async () => {
    setPolicy({ limits: { file_mb: 1, memory_mb: 100 } });
    try {
      const big = await start('bigfile', 'write big');
      assert.ok(statSync(join(big.state.workdir, 'big.bin')).size <= 1024 * 1024);
      assert.doesNotMatch(readFileSync(join(big.state.workdir, 'wrote.txt'), 'utf8'), /exit 0/);
      const mem = await start('memory', 'use memory');
      const said = readFileSync(join(mem.state.workdir, 'memory.txt'), 'utf8');
      assert.match(said, /MemoryError/);
      assert.doesNotMatch(said, /allocated/);
    } finally {
      setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    }
  });

  it('ends an agent whose worktree grows past limits.disk_mb', async () => {
    setPolicy({ limits: { disk_mb: 8 } });
    try {
      const s = await start('disk', 'fill disk');
      assert.equal(s.state.status, 'failed');
      assert.match(s.state.error, /grew by more than 8 MiB.*limits\.disk_mb/);
      assert.ok(existsSync(artifact(s, 'receipt.json')));
    } finally {
      setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    }
  });

  it('issues a receipt for a huge diff: thousands of files and a file larger than the patch cap', async () => {
    const s = await start('hugediff', 'huge diff');
    const receipt = receiptOf(s);
    assert.ok(receipt.diff.files >= 3001, String(receipt.diff.files));
    assert.ok((receipt.diff.paths as string[]).includes('large.bin'));
    assert.match(readFileSync(artifact(s, 'diff.patch'), 'utf8'), /more than the \d+-byte cap/);
  });

  /** Waits until the run is blocked with `taken` answers so far, then answers it through the CLI (answer folder). */
  async function answerWhenBlocked(run: string, text: string, taken = 0): Promise<void> {
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    await waitFor(() => {
      const state = existsSync(path) ? readJson(path) : null;
      return state?.status === 'blocked' && state.answers.length === taken;
    }, `run ${run} to be blocked with ${taken} answers`);
    const res = await cli(['answer', `${readJson(path).source}/${run}`, text]);
    assert.equal(res.code, 0, res.stderr);
  }

  async function startDetached(provider: string, brief: string): Promise<string> {
    const res = await cli(['start', '--brief', brief, '--provider', provider, '--detach']);
    assert.equal(res.code, 0, res.stderr);
    return (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
  }

  async function ended(run: string): Promise<any> {
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    return waitFor(() => {
      const state = readJson(path);
      return ['succeeded', 'failed', 'stopped'].includes(state.status) ? state : null;
    }, `run ${run} to end`);
  }

  const invocations = (run: string) =>
    readFileSync(join(repo.home, 'agent-state', `invocations-${run}`), 'utf8').trim().split('\n').length;

  it('lets a waiting agent read its answer and say so: one invocation, no second session', async () => {
    const run = await startDetached('waits', 'ask and wait');
    await answerWhenBlocked(run, 'teal');
    const state = await ended(run);
    assert.equal(state.status, 'succeeded', state.error);
    assert.equal(invocations(run), 1);
    assert.match(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), /teal/);
  });

  it('puts the answer at $SVC_ANSWER_FILE when an agent that exited after asking is invoked again', async () => {
    const run = await startDetached('asks', 'ask and exit');
    await answerWhenBlocked(run, 'ochre');
    const state = await ended(run);
    assert.equal(state.status, 'succeeded', state.error);
    assert.equal(invocations(run), 2);
    assert.match(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), /ochre/);
  });

  it('stops invoking an agent past limits.invocations, with a receipt', async () => {
    setPolicy({ limits: { invocations: 2 } });
    try {
      const run = await startDetached('always', 'never satisfied');
      await answerWhenBlocked(run, 'one');
      await answerWhenBlocked(run, 'two', 1);
      const state = await ended(run);
      assert.equal(state.status, 'failed');
      assert.match(state.error, /invoked 2 times.*limits\.invocations/);
      assert.equal(invocations(run), 2);
    } finally {
      setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
    }
  });
}

describe('a hostile agent stays in its sandbox', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, () => {
  describe(`as ${isRoot ? 'root' : 'this user'}`, () => suite(false));
  describe('as an unprivileged user (nobody, through setpriv)', { skip: isRoot ? false : 'needs root to drop to nobody' },
    () => suite(true));
});
