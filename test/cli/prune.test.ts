// `svc prune`: real runs in a real git repository leave worktrees and svc/<run> branches; prune removes those of runs
// that ended longer ago than --older-than, never those of a run still running, never a branch svc did not make, never
// the run folders; --dry-run lists and removes nothing. --checkouts does the same for the trigger's managed checkouts,
// asking the trigger's own job queue (a real SQLite file made through its store) which jobs still run. A repository's
// content decides nothing: a committed link at .svc or .svc/worktrees is never followed out of the project, a link
// planted between the plan and the removal is refused, and a committed run state or pending marker keeps nothing.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, CLI, GIT_ENV, AGENT_STATE, EDIT_SCRIPT, type TestRepo } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerJobsStore } from '../../src/db/trigger-jobs-store.ts';
import { planProjectPrune, removeProjectTarget } from '../../src/engine/prune.ts';
import { UntrackableError } from '../../src/engine/run-state.ts';
import { planCheckoutPrune, removeCheckout } from '../../src/trigger/checkout-prune.ts';
import { UnsafePathError } from '../../src/engine/safe-fs.ts';

/**
 * Edits like the fixture provider, but only once agent-state/go-<run> exists: a run the test holds running. Says it
 * started in agent-state/up-<run>: its worktree is then made (git reads a worktree's files half-written while
 * `git worktree add` runs, and fails).
 */
const GATED_SCRIPT = `#!/bin/sh
cat > /dev/null
: > "$HOME/${AGENT_STATE}/up-$SVC_RUN_ID"
while [ ! -e "$HOME/${AGENT_STATE}/go-$SVC_RUN_ID" ]; do sleep 0.05; done
echo "fixed" >> a.txt
`;

const DAY = 86_400_000;

interface Result { code: number | null; stdout: string; stderr: string }

describe('svc prune', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, gated: GATED_SCRIPT } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}` };
  });
  after(() => repo.cleanup());

  function svc(args: string[], cwd = repo.repo, extra: NodeJS.ProcessEnv = {}): Promise<Result> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  }
  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo.repo, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
  const branchExists = (name: string) => git('branch', '--list', name).trim() !== '';
  const tree = (run: string) => join(repo.repo, '.svc', 'worktrees', run);
  const statePath = (run: string) => join(repo.repo, '.svc', 'runs', run, 'state.json');

  /** A finished --worktree run, made by svc start; `endedDaysAgo` moves its end back in its state.json. */
  async function endedRun(endedDaysAgo: number): Promise<string> {
    const r = await svc(['start', '--worktree', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(r.code, 0, r.stderr);
    const { run } = JSON.parse(r.stdout.split('\n')[0]!);
    const state = JSON.parse(readFileSync(statePath(run), 'utf8'));
    const at = new Date(Date.now() - endedDaysAgo * DAY).toISOString();
    writeFileSync(statePath(run), JSON.stringify({ ...state, ended_at: at, updated_at: at }));
    return run;
  }

  it('--dry-run lists the worktree and branch of a run that ended over 7 days ago and removes nothing', async () => {
    const old = await endedRun(10);
    const young = await endedRun(1);
    assert.ok(existsSync(tree(old)) && branchExists(`svc/${old}`));
    // What an agent could leave in its worktree: links to things outside it, which removing the worktree must not follow.
    const outside = join(repo.root, 'precious');
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep.txt'), 'mine');
    symlinkSync(outside, join(tree(old), 'link-to-dir'));
    symlinkSync(join(outside, 'keep.txt'), join(tree(old), 'link-to-file'));
    const r = await svc(['prune', '--dry-run']);
    assert.equal(r.code, 0, r.stderr);
    const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { cwd: repo.repo, encoding: 'utf8' }).trim();
    assert.match(r.stdout, new RegExp(`^Would remove worktree ${join(root, '.svc', 'worktrees', old)} \\(run succeeded 10d ago\\)$`, 'm'));
    assert.match(r.stdout, new RegExp(`^Would remove branch svc/${old} \\(run succeeded 10d ago\\)$`, 'm'));
    assert.match(r.stdout, new RegExp(`^Kept worktree .*${young} \\(run succeeded 1d ago\\)$`, 'm'));
    assert.ok(existsSync(tree(old)) && branchExists(`svc/${old}`), 'nothing was removed');

    const done = await svc(['prune']);
    assert.equal(done.code, 0, done.stderr);
    assert.match(done.stdout, new RegExp(`^Removed worktree .*${old} `, 'm'));
    assert.match(done.stdout, new RegExp(`^Removed branch svc/${old} `, 'm'));
    assert.equal(existsSync(tree(old)), false);
    assert.equal(branchExists(`svc/${old}`), false);
    assert.doesNotMatch(git('worktree', 'list'), new RegExp(old), 'git no longer lists the worktree');
    assert.ok(existsSync(statePath(old)), 'the run folder, its record, stays');
    assert.equal(readFileSync(join(outside, 'keep.txt'), 'utf8'), 'mine', 'nothing behind a link was removed');
    assert.ok(existsSync(tree(young)) && branchExists(`svc/${young}`), 'the young run keeps both');
  });

  it('never removes the worktree or branch of a run that is still running, whatever --older-than says', async () => {
    const started = await svc(['start', '--worktree', '--detach', '--brief', 'append fixed', '--provider', 'gated']);
    assert.equal(started.code, 0, started.stderr);
    const { run } = JSON.parse(started.stdout);
    // Its agent runs once its worktree is made and its state says "running", the reason checked.
    await waitFor(() => existsSync(join(repo.home, AGENT_STATE, `up-${run}`)), 'the run\'s agent to start');
    assert.equal(JSON.parse(readFileSync(statePath(run), 'utf8')).status, 'running');
    const r = await svc(['prune', '--older-than', '0', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { removed: Array<{ run: string }>; kept: Array<{ kind: string; run: string; reason: string }> };
    assert.deepEqual(out.kept.filter((k) => k.run === run).map((k) => [k.kind, k.reason]), [['worktree', 'run is running'], ['branch', 'run is running']]);
    assert.equal(out.removed.some((t) => t.run === run), false);
    assert.ok(out.removed.length >= 2, 'the young ended run went this time');
    assert.ok(existsSync(tree(run)) && branchExists(`svc/${run}`));
    writeFileSync(join(repo.home, AGENT_STATE, `go-${run}`), '');
    await waitFor(() => JSON.parse(readFileSync(statePath(run), 'utf8')).status === 'succeeded', 'the run to finish');
    const after = await svc(['prune', '--older-than', '0']);
    assert.equal(after.code, 0, after.stderr);
    assert.equal(existsSync(tree(run)), false);
    assert.equal(branchExists(`svc/${run}`), false);
  });

  it('removes a left-over svc/<run id> branch and worktree folder without a run folder, and never a branch svc did not make', async () => {
    const orphan = 'r0123456789abcdefghjkmnpqrs';
    // Its tip made 3.5 h ago: its age shows as `3h ago`, however long the suite took to come here.
    const made = `@${Math.floor((Date.now() - 3.5 * 3_600_000) / 1000)} +0000`;
    const tip = execFileSync('git', ['commit-tree', '-p', 'HEAD', '-m', 'left over', 'HEAD^{tree}'],
      { cwd: repo.repo, encoding: 'utf8', env: { ...process.env, ...GIT_ENV, GIT_COMMITTER_DATE: made } }).trim();
    git('branch', `svc/${orphan}`, tip);
    git('branch', 'svc/my-feature');
    mkdirSync(tree('rleftover'), { recursive: true });
    const old = new Date(Date.now() - 30 * DAY);
    utimesSync(tree('rleftover'), old, old);
    // A run without a worktree works on the person's own branch: prune never touches it.
    const plain = await svc(['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(plain.code, 0, plain.stderr);
    const r = await svc(['prune', '--older-than', '1d']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Removed worktree .*rleftover \(no run folder, 30d ago\)$/m);
    assert.match(r.stdout, new RegExp(`^Kept branch svc/${orphan} \\(no run folder, 3h ago\\)$`, 'm'));
    const now = await svc(['prune', '--older-than', '0']);
    assert.match(now.stdout, new RegExp(`^Removed branch svc/${orphan} `, 'm'));
    assert.equal(branchExists(`svc/${orphan}`), false);
    assert.ok(branchExists('svc/my-feature'), 'not a run id: not svc\'s');
    assert.ok(branchExists('main'));
    assert.doesNotMatch(now.stdout + r.stdout, /my-feature|main/);
    // A svc/<run id> branch the person checked out in the project is theirs for now: git could not delete it anyway.
    const onIt = 'r0123456789abcdefghjkmnpqrt';
    git('checkout', '-q', '-b', `svc/${onIt}`);
    try {
      const held = await svc(['prune', '--older-than', '0']);
      assert.equal(held.code, 0, held.stderr);
      assert.ok(branchExists(`svc/${onIt}`));
    } finally {
      git('checkout', '-q', 'main');
    }
  });

  it('--checkouts removes ended jobs\' managed checkouts and keeps those the queue still runs, with running runs or unshipped runs', async () => {
    const checkouts = join(repo.root, 'checkouts');
    const db = join(repo.root, 'trigger.db');
    const job = (id: string) => join(checkouts, 'acme', 'api', id);
    // '.next' is the server's checkout made ahead for the next job, which it may be renaming into a job's place.
    for (const id of ['jdone', 'jqueued', 'jrunning-run', 'jpending', '.next']) {
      mkdirSync(join(checkouts, 'acme', 'api'), { recursive: true });
      execFileSync('git', ['clone', '-q', repo.origin, job(id)], { env: { ...process.env, ...GIT_ENV } });
    }
    const runState = (id: string, run: string, status: string) => {
      mkdirSync(join(job(id), '.svc', 'runs', run), { recursive: true });
      const at = new Date(Date.now() - 10 * DAY).toISOString();
      writeFileSync(join(job(id), '.svc', 'runs', run, 'state.json'), JSON.stringify({ source: 'local', run, status, ended_at: at, updated_at: at }));
    };
    runState('jdone', 'r1', 'succeeded');
    const outside = join(repo.root, 'precious-checkout');
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep.txt'), 'mine');
    symlinkSync(outside, join(job('jdone'), 'link-to-dir'));
    runState('jrunning-run', 'r2', 'running');
    runState('jpending', 'r3', 'failed');
    mkdirSync(join(job('jpending'), '.svc', 'ship-pending'), { recursive: true });
    writeFileSync(join(job('jpending'), '.svc', 'ship-pending', 'r3'), '');
    const trigger = openDatabase(db, triggerMigrations);
    const jobs = createTriggerJobsStore(trigger);
    jobs.insertUncounted({ id: 'jqueued', origin: 'jobs', repo: 'acme/api', brief: 'x', args: [], created_at: Date.now() - 20 * DAY });
    jobs.count(new Map([['jobs', 1]]));
    trigger.close();
    const extra = { SVC_TRIGGER_CHECKOUTS: checkouts, SVC_TRIGGER_DB: db };

    const dry = await svc(['prune', '--checkouts', '--dry-run'], repo.root, extra);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`^Would remove checkout ${job('jdone')} \\(job ended 10d ago\\)$`, 'm'));
    assert.ok(existsSync(job('jdone')));

    const r = await svc(['prune', '--checkouts', '--older-than', '0'], repo.root, extra);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(existsSync(job('jdone')), false);
    assert.equal(readFileSync(join(outside, 'keep.txt'), 'utf8'), 'mine', 'nothing behind a link was removed');
    assert.match(r.stdout, new RegExp(`^Kept checkout ${job('jqueued')} \\(job jqueued is queued\\)$`, 'm'));
    assert.match(r.stdout, new RegExp(`^Kept checkout ${job('jrunning-run')} \\(run r2 is running\\)$`, 'm'));
    assert.match(r.stdout, new RegExp(`^Kept checkout ${job('jpending')} \\(its runs have not reached the Control Plane`, 'm'));
    for (const id of ['jqueued', 'jrunning-run', 'jpending', '.next']) assert.ok(existsSync(job(id)), id);
    assert.doesNotMatch(r.stdout, /\.next/);
  });

  it('--checkouts refuses a job queue at another schema version than its own, and removes nothing', async () => {
    const checkouts = join(repo.root, 'checkouts-newer');
    const db = join(repo.root, 'newer.db');
    const dir = join(checkouts, 'acme', 'api', 'jold');
    mkdirSync(dir, { recursive: true });
    const old = new Date(Date.now() - 30 * DAY);
    utimesSync(dir, old, old);
    const newer = openDatabase(db, triggerMigrations);
    newer.exec(`PRAGMA user_version = ${triggerMigrations.length + 1}`);
    newer.close();
    const r = await svc(['prune', '--checkouts', '--older-than', '0'], repo.root, { SVC_TRIGGER_CHECKOUTS: checkouts, SVC_TRIGGER_DB: db });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is at schema version \d+, this svc knows \d+/);
    assert.ok(existsSync(dir));
  });

  it('refuses bad input with exit 2 and changes nothing', async () => {
    const before = git('branch', '--list').trim();
    for (const args of [['prune', '--older-than', '7'], ['prune', '--older-than', 'soon'], ['prune', '--repo', repo.home], ['prune', 'now']]) {
      const r = await svc(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    }
    const outside = await svc(['prune'], repo.home);
    assert.equal(outside.code, 2);
    assert.match(outside.stderr, /Nothing to prune here/);
    assert.equal(git('branch', '--list').trim(), before);
  });
});

describe('svc prune and a hostile repository', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    const control = `http://127.0.0.1:${await closedPort()}`;
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: control };
  });
  after(() => repo.cleanup());

  function svc(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<Result> {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: repo.root, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  }
  const gitIn = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
  /** A repository whose commit holds what `plant` puts in it (links, fake run folders), as someone could push it. */
  function committed(name: string, plant: (dir: string) => void): string {
    const dir = join(repo.root, name);
    mkdirSync(dir);
    gitIn(dir, 'init', '-q', '-b', 'main');
    writeFileSync(join(dir, 'README'), 'hi');
    plant(dir);
    gitIn(dir, 'add', '-A');
    gitIn(dir, 'commit', '-q', '-m', 'hostile');
    return dir;
  }
  /** Something of the person's outside every project, with a folder an old leftover worktree could be named like. */
  function precious(name: string, inner: string): string {
    const file = join(repo.root, name, inner, 'keep.txt');
    mkdirSync(join(repo.root, name, inner), { recursive: true });
    writeFileSync(file, 'mine');
    const old = new Date(Date.now() - 30 * DAY);
    utimesSync(join(repo.root, name, inner), old, old);
    return file;
  }

  it('never follows a committed link at .svc/worktrees out of the project', async () => {
    const behind = precious('victim-wt', 'precious');
    const project = committed('linked-worktrees', (dir) => {
      mkdirSync(join(dir, '.svc'));
      symlinkSync(join('..', '..', 'victim-wt'), join(dir, '.svc', 'worktrees'));
    });
    assert.match(gitIn(project, 'ls-files', '-s', '.svc/worktrees'), /^120000 /, 'the link is in the commit');
    const r = await svc(['prune', '--repo', project, '--older-than', '0']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /precious/);
    assert.equal(readFileSync(behind, 'utf8'), 'mine');
  });

  it('never follows a committed link at .svc out of the project', async () => {
    const behind = precious('victim-svc', join('worktrees', 'precious'));
    const project = committed('linked-svc', (dir) => symlinkSync(join('..', 'victim-svc'), join(dir, '.svc')));
    const r = await svc(['prune', '--repo', project, '--older-than', '0']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /precious/);
    assert.equal(readFileSync(behind, 'utf8'), 'mine');
  });

  it('refuses to remove a worktree once a link was planted on the way to it after the plan', () => {
    // An empty folder git does not track: what a run's worktree left behind once git forgot it.
    const project = committed('swapped', (dir) => mkdirSync(join(dir, '.svc', 'worktrees', 'rleftover'), { recursive: true }));
    const [tree] = planProjectPrune(project, 0).remove;
    assert.equal(tree?.run, 'rleftover');
    const behind = precious('victim-swap', 'rleftover');
    renameSync(join(project, '.svc', 'worktrees'), join(project, '.svc', 'worktrees-was'));
    symlinkSync(join(repo.root, 'victim-swap'), join(project, '.svc', 'worktrees'));
    assert.throws(() => removeProjectTarget(tree!), UnsafePathError);
    assert.equal(readFileSync(behind, 'utf8'), 'mine');
  });

  it('refuses to remove a managed checkout once a link was planted on the way to it after the plan', () => {
    const checkouts = join(repo.root, 'checkouts-swapped');
    mkdirSync(join(checkouts, 'acme', 'api', 'jgone'), { recursive: true });
    const [checkout] = planCheckoutPrune(checkouts, join(repo.root, 'no-trigger.db'), 0).remove;
    assert.equal(checkout?.name, join(checkouts, 'acme', 'api', 'jgone'));
    const behindCheckout = precious('victim-checkout', 'jgone');
    renameSync(join(checkouts, 'acme', 'api'), join(checkouts, 'acme', 'api-was'));
    symlinkSync(join(repo.root, 'victim-checkout'), join(checkouts, 'acme', 'api'));
    assert.throws(() => removeCheckout(checkouts, checkout!.name), UnsafePathError);
    assert.equal(readFileSync(behindCheckout, 'utf8'), 'mine');
  });

  /** A run folder as svc would write it, but committed by the repository. */
  function fakeRun(dir: string, run: string, fields: Record<string, unknown>): void {
    const at = new Date(Date.now() - 10 * DAY).toISOString();
    mkdirSync(join(dir, '.svc', 'runs', run), { recursive: true });
    const state = { source: 'local', run, ended_at: at, updated_at: at, ...fields };
    writeFileSync(join(dir, '.svc', 'runs', run, 'state.json'), JSON.stringify(state));
  }

  it('a committed `running` run state and ship-pending marker do not keep a managed checkout', async () => {
    const origin = committed('sticky-origin', (dir) => {
      fakeRun(dir, 'r9', { status: 'running' });
      mkdirSync(join(dir, '.svc', 'ship-pending'));
      writeFileSync(join(dir, '.svc', 'ship-pending', 'r9'), '');
    });
    const checkouts = join(repo.root, 'checkouts-sticky');
    const job = join(checkouts, 'acme', 'sticky', 'jsticky');
    mkdirSync(join(checkouts, 'acme', 'sticky'), { recursive: true });
    gitIn(repo.root, 'clone', '-q', origin, job);
    assert.ok(existsSync(join(job, '.svc', 'ship-pending', 'r9')));
    const trigger = { SVC_TRIGGER_CHECKOUTS: checkouts, SVC_TRIGGER_DB: join(repo.root, 'none.db') };
    const r = await svc(['prune', '--checkouts', '--older-than', '0'], trigger);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Removed checkout ${job} `, 'm'));
    assert.equal(existsSync(job), false);
  });

  it('prunes nothing of a repository git cannot list (a corrupt index): the plan fails, the checkout stays', () => {
    const project = committed('unreadable', (dir) => fakeRun(dir, 'rcommitted', { status: 'succeeded' }));
    mkdirSync(join(project, '.svc', 'worktrees', 'rleftover'), { recursive: true });
    writeFileSync(join(project, '.git', 'index'), 'not an index');
    assert.throws(() => planProjectPrune(project, 0), UntrackableError);
    const checkouts = join(repo.root, 'checkouts-unreadable');
    const job = join(checkouts, 'acme', 'unreadable', 'junread');
    gitIn(repo.root, 'clone', '-q', project, job);
    writeFileSync(join(job, '.git', 'index'), 'not an index');
    const plan = planCheckoutPrune(checkouts, join(repo.root, 'no-trigger.db'), 0);
    assert.deepEqual(plan.remove, []);
    assert.match(plan.keep[0]!.reason, /^git could not list what the repository tracks \(git ls-files failed: /);
  });

  it('a committed run folder never gets the person\'s own svc/<name> branch deleted', async () => {
    // A run folder committed under a name of the person's branch: prune must not take it for svc's worktree run.
    const project = committed('fake-run', (dir) => {
      fakeRun(dir, 'my-feature', { status: 'succeeded', worktree: true, branch: 'svc/my-feature' });
    });
    gitIn(project, 'branch', 'svc/my-feature');
    const p = await svc(['prune', '--repo', project, '--older-than', '0']);
    assert.equal(p.code, 0, p.stderr);
    assert.notEqual(gitIn(project, 'branch', '--list', 'svc/my-feature').trim(), '', 'the person\'s branch stays');
  });
});
