// A run made while no Control Plane ran: `svc start` says it was not shipped and why, leaves a
// marker, and the next command in the project that reaches a Control Plane sends it, so `svc runs show` finds it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, CLI, EDIT_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { idleNode, runChild } from '../helpers/run-child.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { prepareRetry, prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { projectWithPending } from '../../src/cli/ship.ts';
import { openRunContext } from '../../src/engine/run-context.ts';
import { readState, writeState, type RunState } from '../../src/engine/run-state.ts';
import { orNull } from '../../src/spawn/tree.ts';
import { procStart } from '../../src/proc-stat.ts';

/** The line a later command says after sending the one run the Control Plane lacked. */
const sentLine = (url: string) =>
  new RegExp(`svc: sent 1 run to the Control Plane at ${url} that had not reached it before\\n`);

/** A project whose runs take the stand-in agent, and a Control Plane: made before a describe's tests, gone after. */
function projectAndControl(): { repo: TestRepo; cp: TestControl } {
  const made = {} as { repo: TestRepo; cp: TestControl };
  before(async () => {
    made.repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    made.cp = await startTestControl();
  });
  after(async () => {
    await made.cp.close();
    made.repo.cleanup();
  });
  return made;
}

/** A run `svc start` made in `repo` while no Control Plane answered (a closed port): what it said, and its name. */
async function runWhileDown(repo: TestRepo) {
  const down = `http://127.0.0.1:${await closedPort()}`;
  const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: down, SVC_SANDBOX: 'none' };
  const started = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
    { cwd: repo.repo, env });
  assert.equal(started.code, 0, started.stderr);
  const { source, run } = JSON.parse(started.stdout.trim().split('\n')[0]!) as { source: string; run: string };
  return { down, env, started, source, run };
}

describe('a run made while no Control Plane answers', () => {
  const made = projectAndControl();

  it('is said to be not shipped, then sent by the next svc command that reaches one', async () => {
    const { repo, cp } = made;
    const { down, env, started, source, run } = await runWhileDown(repo);
    const refused = `\\(connect ECONNREFUSED ${down.slice('http://'.length)}\\)`;
    assert.match(started.stderr, new RegExp(`not shipped: no Control Plane answered at ${down} ${refused}: start the `
      + 'server SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one; the next svc command'));
    assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', run)));
    assert.equal((await cp.request('GET', `/v1/runs/${source}/${run}`)).status, 404);

    const up = { ...env, SVC_CONTROL_URL: cp.url };
    // A command line svc refuses sends nothing: it exits 2 with the marker kept.
    const refusedList = await runChild(process.execPath, [CLI, 'runs', 'list', '--since', 'yesterday'],
      { cwd: repo.repo, env: up });
    assert.equal(refusedList.code, 2, refusedList.stderr);
    assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', run)), 'a refused command sent nothing');
    const shown = await runChild(process.execPath, [CLI, 'runs', 'show', `${source}/${run}`], { cwd: repo.repo, env: up });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stderr, sentLine(cp.url));
    assert.match(shown.stdout, /^status +succeeded$/m);
    assert.equal(existsSync(join(repo.repo, '.svc', 'ship-pending', run)), false, 'the marker is gone');
  });

  it('says the Control Plane refused the token (401) instead of "no Control Plane answered" when it answered', async () => {
    const { repo } = made;
    const locked = await startTestControl({ token: 'pending-ship-token-0123456789' });
    try {
      const base = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: locked.url, SVC_SANDBOX: 'none' };
      for (const [env, said] of [
        [base, 'needs a token \\(401 unauthorized'],
        [{ ...base, SVC_CONTROL_TOKEN: 'not-the-token' }, 'refused the token svc sent \\(401 unauthorized'],
      ] as const) {
        const started = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
          { cwd: repo.repo, env });
        assert.equal(started.code, 0, started.stderr);
        assert.match(started.stderr, new RegExp(`not shipped: the Control Plane at ${locked.url} ${said}`));
        assert.doesNotMatch(started.stderr, /no Control Plane answered/);
        assert.equal(started.stderr.includes('not-the-token'), false);
      }
    } finally {
      await locked.close();
    }
  });

  it('svc ship sends the project\'s runs, says how many did not go and why, and with --all all again', async () => {
    const { repo } = made;
    const down = `http://127.0.0.1:${await closedPort()}`;
    const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: down };
    const ship = (...args: string[]) =>
      runChild(process.execPath, [CLI, 'ship', ...args, '--repo', repo.repo], { cwd: repo.home, env });
    const failed = await ship();
    assert.equal(failed.code, 1, failed.stderr);
    assert.ok(failed.stderr.startsWith(`svc ship: 3 of 3 runs not sent: no Control Plane answered at ${down}`));

    const fresh = await startTestControl();
    try {
      env.SVC_CONTROL_URL = fresh.url;
      const shipped = await ship();
      assert.equal(shipped.code, 0, shipped.stderr);
      assert.equal(shipped.stdout, `Shipped 3 runs to ${fresh.url}\n`);
      const { items } = (await fresh.request('GET', '/v1/runs')).json as { items: Array<{ run: string }> };
      assert.equal(items.length, 3);
      const events = () => items.reduce((n, { run }) =>
        n + fresh.deps.stores.events.listAll({ source: 'local', run, after: 0, limit: 500 }).length, 0);
      const before = events();

      const all = await ship('--all');
      assert.equal(all.code, 0, all.stderr);
      assert.equal(all.stdout, `Shipped 3 runs to ${fresh.url}\n`);
      assert.ok(events() > before, '--all sends again the events the offsets said had gone');
    } finally {
      await fresh.close();
    }
  });
});

// Its worker ships a run, and clears its pid only after its last ship (run-context.ts leave): the pass before a command
// leaves it to that worker, since two shippers would roll each other's ship.json back.
describe('a pending run whose worker is still there', () => {
  const made = projectAndControl();

  it('is left to its worker while one is still there, and sent by the next command once it has gone', async () => {
    const { repo, cp } = made;
    const { env, source, run } = await runWhileDown(repo);
    const marker = join(repo.repo, '.svc', 'ship-pending', run);
    assert.ok(existsSync(marker));
    const dir = join(repo.repo, '.svc', 'runs', run);
    const ended = readState(dir);
    // Its worker still there (a resume's, say, or this one before its pid's clear, its last write): it ships the run.
    const worker = await idleNode([CLI, 'worker', 'resume', '--run-id', run, '--repo', repo.repo]);
    const up = { ...env, SVC_CONTROL_URL: cp.url };
    const list = () => runChild(process.execPath, [CLI, 'runs', 'list'], { cwd: repo.repo, env: up });
    try {
      writeState(dir, { ...ended, pid: worker.pid!, proc_start: procStart(worker.pid!) });
      const listed = await list();
      assert.equal(listed.code, 0, listed.stderr);
      assert.equal((await cp.request('GET', `/v1/runs/${source}/${run}`)).status, 404, 'not sent beside its worker');
      assert.ok(existsSync(marker), 'the marker stays');
    } finally {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
    const listed = await list();
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stderr, sentLine(cp.url));
    assert.equal((await cp.request('GET', `/v1/runs/${source}/${run}`)).status, 200);
    assert.equal(existsSync(marker), false, 'the marker is gone');
  });

  /** A run shipped once, now with `fields` and a worker of it still there (killed by the caller). */
  async function runWithWorker(fields: Partial<RunState>) {
    const { repo, cp } = made;
    const { env, source, run } = await runWhileDown(repo);
    const up = { ...env, SVC_CONTROL_URL: cp.url };
    const ship = (...args: string[]) =>
      runChild(process.execPath, [CLI, 'ship', '--repo', repo.repo, ...args], { cwd: repo.home, env: up });
    assert.equal((await ship(run)).code, 0);
    const dir = join(repo.repo, '.svc', 'runs', run);
    const worker = await idleNode([CLI, 'worker', 'resume', '--run-id', run, '--repo', repo.repo]);
    writeState(dir, { ...readState(dir), ...fields, pid: worker.pid!, proc_start: procStart(worker.pid!) });
    const shown = async () => (await cp.request('GET', `/v1/runs/${source}/${run}`)).json as { status: string };
    return { run, dir, worker, ship, shown, marker: join(repo.repo, '.svc', 'ship-pending', run) };
  }

  it('is left to its worker by svc ship, which fails when RUN names it or --all asks for all again; --all keeps its ' +
    'offsets', async () => {
    const { run, dir, worker, ship, shown } = await runWithWorker({ status: 'running', ended_at: null });
    const said = `svc ship: ${run}: not shipped here: its worker (pid ${worker.pid}) is still there and ships it\n`;
    try {
      const offsets = readFileSync(join(dir, 'ship.json'), 'utf8');
      const named = await ship(run);
      assert.equal(named.code, 1, named.stderr);
      assert.equal(named.stderr, `${said}svc ship: 1 of 1 runs not sent (each is named above)\n`);
      const all = await ship();
      assert.equal(all.code, 0, all.stderr);
      // The project's other runs (the tests' before) go: this one is in its worker's hands.
      assert.equal(all.stderr, said);
      assert.match(all.stdout, /^Shipped \d+ runs?\b/);
      // Its worker sends only what it has not sent: what a Control Plane restored from a backup lost of it is not
      // sent again, so --all, which asks for that, is not done for it.
      const again = await ship('--all');
      assert.equal(again.code, 1, again.stderr);
      assert.match(again.stderr, new RegExp(`^svc ship: ${run}: not sent again from the start: its worker \\(pid ` +
        `${worker.pid}\\) is still there and sends only what it has not sent; svc ship --all ${run} once it has ` +
        'left\nsvc ship: 1 of \\d+ runs not sent \\(each is named above\\)\n$'));
      assert.equal(readFileSync(join(dir, 'ship.json'), 'utf8'), offsets, 'its worker\'s offsets as they were');
      assert.equal((await shown()).status, 'succeeded', 'nothing of it was sent beside its worker');
    } finally {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
  });

  it('is waited for by svc ship RUN when the run has ended, as a resume waits, then left to its worker', async () => {
    const { run, worker, ship, shown, marker } = await runWithWorker({ status: 'failed' });
    writeFileSync(marker, '');
    try {
      const named = await ship(run);
      assert.equal(named.code, 1, named.stderr);
      assert.equal(named.stderr, `svc ship: ${run}: not shipped here: its worker (pid ${worker.pid}) is still there ` +
        'and ships it\nsvc ship: 1 of 1 runs not sent (each is named above)\n');
      assert.equal((await shown()).status, 'succeeded');
      assert.ok(existsSync(marker), 'its marker kept');
    } finally {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
  });
});

describe('svc ship with a run the Control Plane refuses', () => {
  it('sends the other runs all the same and names the one it could not send', async () => {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    const cp = await startTestControl();
    try {
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: cp.url };
      for (const runId of ['rcli1', 'rcli2', 'rcli3']) {
        await prepareRun({ input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake', repo: repo.repo, runId, env });
      }
      // Another runner of the source stored rcli1 first, bound to its own key.
      const t = new Date().toISOString();
      const other = { run: 'rcli1', status: 'running', started_at: t, updated_at: t, run_key: 'other-runner-key-0123456789abcdefghijklmn' };
      assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'local', runs: [other] } })).status, 200);
      const res = await runChild(process.execPath, [CLI, 'ship', '--repo', repo.repo], { cwd: repo.home, env });
      assert.equal(res.code, 1, res.stderr);
      const lines = res.stderr.trimEnd().split('\n');
      assert.match(lines[0]!, new RegExp(`^svc ship: rcli1: not shipped: the Control Plane at ${cp.url} answered 403 forbidden_run \\(Run local/rcli1 is bound`));
      assert.equal(lines[1], 'svc ship: 1 of 3 runs not sent (each is named above)');
      assert.equal(lines.length, 2, res.stderr);
      for (const run of ['rcli2', 'rcli3']) assert.equal((await cp.request('GET', `/v1/runs/local/${run}`)).status, 200);
      // Marked to be sent, it is tried before the next command and said to be refused, not left waiting unseen.
      mkdirSync(join(repo.repo, '.svc', 'ship-pending'), { recursive: true });
      writeFileSync(join(repo.repo, '.svc', 'ship-pending', 'rcli1'), '');
      const shown = await runChild(process.execPath, [CLI, 'runs', 'show', 'local/rcli2'], { cwd: repo.repo, env });
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stderr, /^svc: run rcli1 was not sent: the Control Plane at \S+ answered 403 forbidden_run /m);
      assert.match(shown.stderr, /; not tried again before each command \(`svc ship` tries it\)$/m);
      // Said once: refused for good, it does not come back before every later command.
      assert.equal(existsSync(join(repo.repo, '.svc', 'ship-pending', 'rcli1')), false);
      const again = await runChild(process.execPath, [CLI, 'runs', 'show', 'local/rcli2'], { cwd: repo.repo, env });
      assert.equal(again.code, 0, again.stderr);
      assert.doesNotMatch(again.stderr, /rcli1/);
    } finally {
      await cp.close();
      repo.cleanup();
    }
  });
});

describe('svc ship with links in .svc/runs', () => {
  it('names and skips a link at a run\'s folder or at .svc/runs, following neither, and counts no file as a run',
    async () => {
      const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
      const cp = await startTestControl();
      try {
        const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: cp.url };
        await prepareRun({ input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake',
          repo: repo.repo, runId: 'rlive1', env });
        const runs = join(repo.repo, '.svc', 'runs');
        symlinkSync(join(runs, 'rlive1'), join(runs, 'rlink1'));
        writeFileSync(join(runs, 'rfile1'), '');
        const ship = () => runChild(process.execPath, [CLI, 'ship', '--repo', repo.repo], { cwd: repo.home, env });
        const res = await ship();
        assert.equal(res.code, 0, res.stderr);
        assert.equal(res.stderr, `svc ship: rlink1: ${join(runs, 'rlink1')} is a symbolic link (never followed); ` +
          'not shipped\n');
        assert.equal(res.stdout, `Shipped 1 run to ${cp.url}\n`);

        renameSync(runs, join(repo.repo, '.svc', 'elsewhere'));
        symlinkSync(join(repo.repo, '.svc', 'elsewhere'), runs);
        const linked = await ship();
        assert.equal(linked.code, 0, linked.stderr);
        assert.equal(linked.stderr, `svc ship: ${runs} is a symbolic link (never followed); nothing shipped\n`);
        assert.equal(linked.stdout, 'Shipped 0 runs\n');
      } finally {
        await cp.close();
        repo.cleanup();
      }
    });
});

describe('a run made with SVC_SHIP=0', () => {
  // The commands after its making run without SVC_SHIP: only the run's plan keeps it local.
  async function project() {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    const cp = await startTestControl();
    const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: cp.url, SVC_SANDBOX: 'none' };
    const made = { input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake', repo: repo.repo };
    return {
      repo, cp, env,
      make: async (runId: string, more: NodeJS.ProcessEnv = { SVC_SHIP: '0' }) =>
        (await prepareRun({ ...made, runId, env: { ...env, ...more } })).state,
      dir: (run: string) => join(repo.repo, '.svc', 'runs', run),
      svc: (...args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env }),
      status: async (run: string) => (await cp.request('GET', `/v1/runs/local/${run}`)).status,
      pending: () => orNull(() => readdirSync(join(repo.repo, '.svc', 'ship-pending'))) ?? [],
      close: async () => {
        await cp.close();
        repo.cleanup();
      },
    };
  }

  it('is shipped by no later command, nor by svc ship, until svc ship names it', async () => {
    const p = await project();
    try {
      await p.make('keep1');
      await p.make('sent1', {});
      // A stop from outside their workers (no worker started) marks each to ship, and the stopping command sends
      // it, but for the run kept local.
      for (const run of ['keep1', 'sent1']) assert.equal((await p.svc('start', '--stop', run)).code, 0);
      assert.equal(readState(p.dir('keep1')).status, 'stopped');
      assert.deepEqual([await p.status('keep1'), await p.status('sent1'), p.pending()], [404, 200, []]);

      const ship = (...args: string[]) =>
        runChild(process.execPath, [CLI, 'ship', '--repo', p.repo.repo, ...args], { cwd: p.repo.home, env: p.env });
      const all = await ship();
      assert.equal(all.code, 0, all.stderr);
      assert.equal(all.stderr, 'svc ship: 1 run kept local (SVC_SHIP=0): svc ship RUN sends one\n');
      assert.equal(await p.status('keep1'), 404);

      const named = await ship('keep1');
      assert.equal(named.code, 0, named.stderr);
      assert.equal(named.stdout, `Shipped 1 run to ${p.cp.url}\n`);
      assert.equal(await p.status('keep1'), 200);
    } finally {
      await p.close();
    }
  });

  it('stays local through a rename of its repository', async () => {
    const p = await project();
    try {
      execFileSync('git', ['remote', 'remove', 'origin'], { cwd: p.repo.repo });
      await p.make('keep1');
      await p.svc('start', '--stop', 'keep1');
      execFileSync('git', ['remote', 'add', 'origin', join(p.repo.root, 'acme', 'api.git')], { cwd: p.repo.repo });
      const renaming = await p.svc('start', '--brief', 'append fixed', '--provider', 'fake', '--worktree');
      assert.equal(renaming.code, 0, renaming.stderr);
      assert.match(renaming.stderr, /now named acme\/api; 1 earlier run renamed from work/);
      assert.equal(readState(p.dir('keep1')).repo, 'acme/api');
      assert.deepEqual(p.pending(), []);
      assert.equal((await p.svc('runs', 'list')).code, 0);
      assert.equal(await p.status('keep1'), 404);
    } finally {
      await p.close();
    }
  });

  it('stays local when a resume\'s worker does not start', async () => {
    const p = await project();
    try {
      const state = await p.make('keep1');
      writeState(p.dir('keep1'), { ...state, status: 'stopped', ended_at: new Date().toISOString() });
      // Its worker's program missing: the spawn fails with no pid, and the run is put back as it was.
      const execPath = process.execPath;
      process.execPath = join(p.repo.home, 'no-such-node');
      let worker: ReturnType<typeof spawnWorker>;
      try {
        worker = spawnWorker(readState(p.dir('keep1')), 'resume', p.env, false);
      } finally {
        process.execPath = execPath;
      }
      await once(worker, 'error');
      assert.equal(readState(p.dir('keep1')).status, 'stopped');
      assert.deepEqual(p.pending(), []);
      assert.equal((await p.svc('runs', 'list')).code, 0);
      assert.equal(await p.status('keep1'), 404);
    } finally {
      await p.close();
    }
  });

  it('is not shipped by a context opened on it without SVC_SHIP=0: the run\'s plan decides', async () => {
    const p = await project();
    try {
      await p.make('keep1');
      const ctx = openRunContext(p.dir('keep1'), p.env, {});
      ctx.event('log', { stream: 'svc', text: 'a line' });
      await ctx.close();
      assert.equal(await p.status('keep1'), 404);
    } finally {
      await p.close();
    }
  });

  it('ships as any run does when its plan is not svc\'s own (writable by others): a stop sends it', async () => {
    const p = await project();
    try {
      await p.make('forged1');
      chmodSync(join(p.dir('forged1'), 'plan.json'), 0o666);
      assert.equal((await p.svc('start', '--stop', 'forged1')).code, 0);
      assert.equal(await p.status('forged1'), 200);
    } finally {
      await p.close();
    }
  });
});

describe('a retry', () => {
  it('stays local or ships as its own command\'s SVC_SHIP says, not as the run it retries did', async () => {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    try {
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home };
      const made = { input: 'a brief', forceBrief: true, pr: false, worktree: true, provider: 'fake', repo: repo.repo };
      await prepareRun({ ...made, runId: 'ships1', env });
      await prepareRun({ ...made, runId: 'local1', env: { ...env, SVC_SHIP: '0' } });
      const kept = await prepareRetry(repo.repo, 'ships1', 'kept2', { ...env, SVC_SHIP: '0' });
      assert.equal(kept.plan.local, true);
      const sent = await prepareRetry(repo.repo, 'local1', 'sent2', env);
      assert.equal(sent.plan.local, undefined);
    } finally {
      repo.cleanup();
    }
  });
});

describe('a run made with SVC_SHIP=0, verified later without it', () => {
  it('is not shipped by its verify worker either: the choice is the run\'s, kept in its plan', async () => {
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    const cp = await startTestControl();
    try {
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: cp.url, SVC_SANDBOX: 'none' };
      const svc = (more: NodeJS.ProcessEnv, ...args: string[]) =>
        runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env: { ...env, ...more } });
      const made = await svc({ SVC_SHIP: '0' }, '--brief', 'append fixed', '--provider', 'fake', '--worktree');
      assert.equal(made.code, 0, made.stderr);
      const { run } = JSON.parse(made.stdout.trim().split('\n')[0]!) as { run: string };
      const verified = await svc({}, '--verify', run);
      assert.equal(verified.code, 0, verified.stderr);
      assert.equal((await cp.request('GET', `/v1/runs/local/${run}`)).status, 404);
    } finally {
      await cp.close();
      repo.cleanup();
    }
  });
});

// Every command looks for pending runs from its folder up: an ancestor's `.svc` svc cannot look into (another user's
// `/.svc`: EACCES for anyone but root; here a file, ENOTDIR for root too) is no project, not a failed command.
describe('pending runs looked for from a folder up', () => {
  it('takes an ancestor .svc it cannot look into for no project', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-pending-'));
    try {
      writeFileSync(join(root, '.svc'), 'not a folder');
      mkdirSync(join(root, 'work', 'repo'), { recursive: true });
      assert.equal(projectWithPending(join(root, 'work', 'repo')), null);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('from inside a run\'s worktree looks in its project, never in a .svc/ship-pending its agent wrote there', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-pending-'));
    try {
      const worktree = join(root, '.svc', 'worktrees', 'r1');
      mkdirSync(join(worktree, '.svc', 'ship-pending'), { recursive: true });
      writeFileSync(join(worktree, '.svc', 'ship-pending', 'rplanted'), '');
      mkdirSync(join(worktree, 'sub'));
      assert.equal(projectWithPending(join(worktree, 'sub')), null);
      mkdirSync(join(root, '.svc', 'ship-pending'));
      writeFileSync(join(root, '.svc', 'ship-pending', 'r1'), '');
      assert.equal(projectWithPending(worktree), root);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
