// The trigger's local executor starts each job's `svc start`; one that hangs is ended with everything it started in
// its group, through the one process-lifetime module (engine/proc-group.ts), never by a bare pid.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalExecutor, type JobExecutor } from '../../src/trigger/executor.ts';
import type { RunOutcome } from '../../src/trigger/run-follow.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { CLI, GIT_ENV, makeRepo, processAlive, readJson } from '../engine/fixtures.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { startTestControl } from '../helpers/control-server.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { identityOf } from '../../src/proc-stat.ts';
import { newRunId } from '../../src/engine/ids.ts';
import { createLogger } from '../../src/log.ts';

const FAKE_SVC = new URL('./fake-svc.mjs', import.meta.url).pathname;

/**
 * The launch deadline of the tests whose launcher hangs: the launcher must have started and said so by then (at
 * 500 ms a loaded machine could end a node before it wrote its first file).
 */
const HANG_MS = 3_000;

/** Holds its run until the test writes the release file. */
const HOLD_SCRIPT = `#!/bin/sh
cat > /dev/null
while [ ! -f "$HOME/agent-state/release" ]; do sleep 0.05; done
echo "held" >> a.txt
`;

/**
 * Stands in for `svc start --stop` of run r1, whose worker died: records what it was handed, then does what the file
 * stop-does in its folder says: `fail` (ends the run failed with its cost, as svc does), `stopped` (a person's stop
 * came first), `refuse` (says why on stderr, exits 1), `hang`, or `held` (ends the run failed, then sends it: writes
 * `sent` once the file `release` is there).
 */
const STOPPER = `import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const handed = process.env.SVC_HANDOFF_FD === '3' ? JSON.parse(readFileSync(3, 'utf8')) : null;
writeFileSync('stop-call.json', JSON.stringify({ args: process.argv.slice(2), handed, pid: process.pid }));
const does = readFileSync('stop-does', 'utf8');
const path = '.svc/runs/r1/state.json';
const end = { ...JSON.parse(readFileSync(path, 'utf8')), ended_at: '2026-11-29T12:05:00.000Z', cost_usd: 1.25 };
const status = { fail: 'failed', stopped: 'stopped', held: 'failed' }[does];
if (status) writeFileSync(path, JSON.stringify({ ...end, status }));
if (does === 'refuse') {
  process.stderr.write('svc: Run r1 belongs to the project at /elsewhere\\n');
  process.exit(1);
}
if (does === 'hang') setInterval(() => {}, 1 << 30);
if (does === 'held') {
  while (!existsSync('release')) await new Promise((resolve) => setTimeout(resolve, 20));
  writeFileSync('sent', '');
}
`;

/** Follows run r1, whose worker is dead, in a folder whose `svc start --stop` is STOPPER doing `does`. */
async function followDeadWorker(does: string, o: {
  env?: NodeJS.ProcessEnv; launchTimeoutMs?: number;
  shutdown?: (stopStarted: Promise<unknown>, dir: string) => AbortSignal;
} = {}): Promise<{
  outcome: Awaited<ReturnType<JobExecutor['follow']>>; said: string[]; stop: { handed: unknown; pid: number };
  sent: boolean;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
  try {
    const worker = spawn('sleep', ['300']);
    const identity = identityOf(worker.pid!);
    worker.kill('SIGKILL');
    await once(worker, 'exit');
    mkdirSync(join(dir, '.svc', 'runs', 'r1'), { recursive: true });
    const state = { run: 'r1', status: 'running', started_at: '2026-11-29T12:00:00.000Z', cost_usd: 0.5, ...identity };
    writeFileSync(join(dir, '.svc', 'runs', 'r1', 'state.json'), JSON.stringify(state));
    writeFileSync(join(dir, 'stopper.mjs'), STOPPER);
    writeFileSync(join(dir, 'stop-does'), does);
    const said: string[] = [];
    const executor = createLocalExecutor({
      cliPath: join(dir, 'stopper.mjs'), env: { PATH: process.env.PATH, ...o.env }, pollMs: 20,
      launchTimeoutMs: o.launchTimeoutMs, log: createLogger('test', (line) => said.push(line)),
    });
    const stopStarted = () => waitFor(() => existsSync(join(dir, 'stop-call.json')), 'the stop to start');
    const signal = o.shutdown ? o.shutdown(stopStarted(), dir) : AbortSignal.timeout(30_000);
    const outcome = await executor.follow({ source: 'local', run: 'r1' }, signal, { reattach: true, workdir: dir });
    return { outcome, said, stop: readJson(join(dir, 'stop-call.json')), sent: existsSync(join(dir, 'sent')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The run's end that `follow` gave, failing the test on anything else. */
function ended(outcome: Awaited<ReturnType<JobExecutor['follow']>>): RunOutcome {
  assert.ok(typeof outcome === 'object' && outcome !== null, `followed to ${String(outcome)}`);
  return outcome;
}

/** A process whose argv is a trigger's `svc start … --run-id <run>` that hangs, in a group of its own. */
function hungLauncher(run: string, cli = CLI): ChildProcess {
  return spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', cli, 'start', '--run-id', run], {
    detached: true, stdio: 'ignore',
  });
}

/**
 * Follows, re-attached, a run the real `svc start --stop` can stop, queued a day ago and still without a worker;
 * with `launcher`, as a lost launch whose recorded launcher is the process it starts.
 */
async function followWorkerless(launcher?: (run: string) => ChildProcess) {
  const repo = makeRepo();
  try {
    const run = newRunId();
    const dir = join(repo.repo, '.svc', 'runs', run);
    mkdirSync(dir, { recursive: true });
    const state = {
      run, status: 'queued', provider: 'mycli', repo_path: repo.repo, started_at: '2026-11-29T12:00:00.000Z',
      updated_at: '2026-11-29T12:00:00.000Z', pid: null, pgid: null, proc_start: null, child: null,
    };
    writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
    const env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}`,
    };
    const started = launcher?.(run);
    const argvOf = (pid: number | undefined) => readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (started) await waitFor(() => argvOf(started.pid).includes('--run-id'), 'its argv');
    const launching = started ? { launching: { launcher: identityOf(started.pid!) } } : {};
    const said: string[] = [];
    const log = createLogger('test', (line) => said.push(line));
    const executor = createLocalExecutor({ cliPath: CLI, env, pollMs: 20, log });
    const outcome = await executor.follow({ source: 'local', run }, AbortSignal.timeout(20_000), {
      reattach: true, workdir: repo.repo, ...launching,
    });
    return { outcome, state: readJson(join(dir, 'state.json')), launcher: started, run, said };
  } finally {
    repo.cleanup();
  }
}

describe('the local executor', () => {
  it('ends a launcher that never finishes, and the process it started in its group', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      const hang = join(dir, 'hang.sh');
      // Stands in for a `svc start` that hangs: a child of its own in the same group, then waits forever.
      writeFileSync(hang, `#!/bin/sh\nsleep 300 &\necho $! > "${dir}/child.pid"\nwait\n`);
      chmodSync(hang, 0o755);
      const executor = createLocalExecutor({
        cliPath: hang, execPath: '/bin/sh', env: { PATH: process.env.PATH }, launchTimeoutMs: HANG_MS,
      });
      // Its time limit counts from its word, given once it has started its child: however slow the machine, there
      // is a child to end when the limit comes.
      const pidFile = join(dir, 'child.pid');
      const started = () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n');
      const word = waitFor(started, 'the launcher to start its child').then(() => true);
      const result = await executor.launch({ run: newRunId(), id: 'job-1', args: ['start'], workdir: dir, word });
      assert.equal(result.run, null);
      assert.match(result.error ?? '', new RegExp(`did not finish within ${HANG_MS} ms`));
      const child = Number(readFileSync(pidFile, 'utf8'));
      await waitFor(() => !processAlive(child), 'the hung launcher\'s child to be ended with it');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('follows the run of a launcher SIGKILLed after it printed its run line, instead of failing the job', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      // Stands in for `svc start --detach` killed while it sends earlier runs to the Control Plane (src/cli/start.ts):
      // its worker (here: the state it leaves) goes on.
      const launcher = join(dir, 'launcher.mjs');
      writeFileSync(launcher, `import { mkdirSync, writeFileSync } from 'node:fs';
mkdirSync('.svc/runs/r1', { recursive: true });
writeFileSync('.svc/runs/r1/state.json', JSON.stringify({ run: 'r1', status: 'succeeded', verdict: 'verified' }));
process.stdout.write('{"source":"local","run":"r1"}\\n', () => process.kill(process.pid, 'SIGKILL'));
`);
      const executor = createLocalExecutor({ cliPath: launcher, env: { PATH: process.env.PATH } });
      const args = ['start', '--brief', 'b', '--detach'];
      const result = await executor.launch({ id: 'job-1', run: 'r1', args, workdir: dir });
      assert.deepEqual({ run: result.run, error: result.error }, { run: { source: 'local', run: 'r1' }, error: null });
      const outcome = await executor.follow(result.run!, AbortSignal.timeout(10_000), {
        reattach: false, workdir: dir,
      });
      assert.ok(typeof outcome === 'object' && outcome !== null);
      assert.equal(outcome.status, 'succeeded');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sees a run end when its state.json is replaced, without waiting for its poll', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      const run = join(dir, '.svc', 'runs', 'r1');
      mkdirSync(run, { recursive: true });
      const state = (status: string) => {
        writeFileSync(join(run, 'state.tmp'), JSON.stringify({ run: 'r1', status, verdict: null }));
        renameSync(join(run, 'state.tmp'), join(run, 'state.json')); // as the engine writes it
      };
      state('running');
      // An hour between polls: only the watch on the run's folder can end this follow within the test's time.
      const executor = createLocalExecutor({ cliPath: '/bin/true', env: {}, pollMs: 3_600_000 });
      const ac = new AbortController();
      const followed = executor.follow({ source: 'local', run: 'r1' }, ac.signal, { reattach: false, workdir: dir });
      setTimeout(() => state('succeeded'), 50);
      const outcome = await followed;
      assert.ok(typeof outcome === 'object' && outcome !== null);
      assert.equal(outcome.status, 'succeeded');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ends failed a run whose worker died without saying so, instead of following it for ever', async () => {
    // Its stop refuses: the job still ends, and the refusal is logged with what the stop said.
    const { outcome, said } = await followDeadWorker('refuse');
    assert.ok(typeof outcome === 'object' && outcome !== null, `followed to ${String(outcome)}`);
    assert.deepEqual([outcome.status, outcome.error, outcome.ended_at], ['failed', 'the run\'s worker died', null]);
    assert.equal(outcome.started_at, '2026-11-29T12:00:00.000Z');
    const logged = said.map((line) => JSON.parse(line) as { level: string; run: string; error: string });
    assert.deepEqual(logged.map(({ level, run, error }) => ({ level, run, error })), [{
      level: 'error', run: 'local/r1', error: 'exited with 1: svc: Run r1 belongs to the project at /elsewhere',
    }]);
  });

  it('ends a SIGKILLed worker\'s run in its folder and on the Control Plane, and what it left', async () => {
    const control = await startTestControl();
    const repo = makeRepo({ providers: { hold: HOLD_SCRIPT } });
    try {
      const config = readJson(join(repo.repo, '.svc', 'config.json'));
      writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify({ ...config, provider: 'hold' }));
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url };
      const executor = createLocalExecutor({ cliPath: CLI, env, pollMs: 50 });
      const args = ['start', '--brief', 'hold', '--detach'];
      const launched = await executor.launch({ run: newRunId(), id: 'job-1', args, workdir: repo.repo });
      assert.equal(launched.error, null);
      const ref = launched.run!;
      const state = () => readJson(join(repo.repo, '.svc', 'runs', ref.run, 'state.json'));
      await waitFor(() => state().child !== null, 'the provider to start');
      const { pid, child } = state();
      process.kill(pid, 'SIGKILL');
      const outcome = await executor.follow(ref, AbortSignal.timeout(60_000), { reattach: true, workdir: repo.repo });
      assert.ok(typeof outcome === 'object' && outcome !== null, `followed to ${String(outcome)}`);
      assert.equal(outcome.status, 'failed');
      assert.equal(state().status, 'failed', 'the run folder says the run ended');
      const onControl = async () => (await control.request('GET', `/v1/runs/${ref.source}/${ref.run}`)).json?.status;
      await waitFor(async () => await onControl() === 'failed', 'the Control Plane to have the run\'s end');
      await waitFor(() => !processAlive(child.pgid), 'the provider the dead worker left to be ended');
    } finally {
      await control.close();
      repo.cleanup();
    }
  });

  it('takes a dead worker\'s outcome from the end its stop wrote; hands the stop only what it ships with', async () => {
    const env = {
      GITHUB_TOKEN: 'k-github-1', GH_TOKEN: 'k-gh-2', ERRTRACK_AUTH_TOKEN: 'k-errtrack-3',
      SVC_CONTROL_TOKEN: 'k-control-4', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=k-otel-5',
    };
    const { outcome, said, stop } = await followDeadWorker('fail', { env });
    assert.ok(typeof outcome === 'object' && outcome !== null, `followed to ${String(outcome)}`);
    assert.deepEqual(
      { status: outcome.status, error: outcome.error, ended_at: outcome.ended_at, cost_usd: outcome.cost_usd },
      { status: 'failed', error: 'the run\'s worker died', ended_at: '2026-11-29T12:05:00.000Z', cost_usd: 1.25 },
    );
    assert.deepEqual(stop.handed, {
      secrets: { SVC_CONTROL_TOKEN: 'k-control-4', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=k-otel-5' },
    });
    assert.deepEqual(said, []);
  });

  it('shows a dead worker\'s run stopped when a person\'s stop of it came first', async () => {
    const { outcome } = await followDeadWorker('stopped');
    assert.ok(typeof outcome === 'object' && outcome !== null, `followed to ${String(outcome)}`);
    assert.deepEqual([outcome.status, outcome.error], ['stopped', null]);
  });

  it('ends a dead worker\'s hung stop at its deadline, during a shutdown too', async () => {
    const late = await followDeadWorker('hang', { launchTimeoutMs: HANG_MS });
    assert.ok(typeof late.outcome === 'object' && late.outcome !== null, `followed to ${String(late.outcome)}`);
    assert.equal(late.outcome.error, 'the run\'s worker died');
    assert.match(late.said.join(''), new RegExp(`did not finish within ${HANG_MS} ms`));
    await waitFor(() => !processAlive(late.stop.pid), 'the stop to be ended at its deadline');
    const shutdown = new AbortController();
    const { outcome, stop } = await followDeadWorker('hang', {
      launchTimeoutMs: HANG_MS,
      shutdown: (stopStarted) => {
        void stopStarted.then(() => shutdown.abort());
        return shutdown.signal;
      },
    });
    assert.equal(outcome, 'aborted');
    await waitFor(() => !processAlive(stop.pid), 'the stop to be ended at its deadline');
  });

  it('lets a dead worker\'s stop send the run\'s end when the server shuts down meanwhile', async () => {
    const shutdown = new AbortController();
    const { outcome, sent, said } = await followDeadWorker('held', {
      shutdown: (stopStarted, dir) => {
        void stopStarted.then(() => {
          shutdown.abort();
          writeFileSync(join(dir, 'release'), '');
        });
        return shutdown.signal;
      },
    });
    // The job stays running, re-attached on restart to the end this stop wrote; the Control Plane has that end.
    assert.equal(outcome, 'aborted');
    assert.ok(sent, 'the stop was ended before it sent the run\'s end');
    assert.deepEqual(said, []);
  });

  it('ends a launch the server lost, then the run it made that has no worker, instead of following it for ever',
    async () => {
    // The launcher a server SIGKILLed mid-launch left running, and the run it made before it started a worker.
    const { outcome, state, launcher } = await followWorkerless((run) => hungLauncher(run));
    assert.deepEqual([ended(outcome).status, ended(outcome).error], ['failed', 'the run\'s worker died']);
    // The real `svc start --stop` recorded it as a dead worker's run, never a person's stop.
    assert.deepEqual([state.status, state.failure.class], ['failed', 'infra']);
    assert.equal(processAlive(launcher!.pid!), false, 'the lost launcher still runs');
  });

  it('leaves alone a recorded launcher that is not the run\'s launcher (the job\'s row is only a claim), and says so',
    async () => {
    const other = newRunId();
    const { outcome, launcher, run, said } = await followWorkerless(() => hungLauncher(other));
    try {
      assert.equal(ended(outcome).status, 'failed');
      assert.equal(processAlive(launcher!.pid!), true, 'another run\'s launcher was ended');
      const warned = said.map((line) => JSON.parse(line)).filter((entry) => entry.level === 'warn');
      assert.equal(warned.length, 1, said.join(''));
      assert.match(warned[0].msg, /launcher is left running/);
      assert.deepEqual([warned[0].pid, warned[0].run], [launcher!.pid, `local/${run}`]);
    } finally {
      launcher!.kill('SIGKILL');
    }
  });

  it('ends a lost launcher an earlier install started from another CLI path (an upgrade moved dist/)', async () => {
    const moved = join(tmpdir(), 'svc-before-upgrade', 'dist', 'cli.js');
    const { outcome, state, launcher, said } = await followWorkerless((run) => hungLauncher(run, moved));
    try {
      assert.deepEqual([ended(outcome).status, state.failure.class], ['failed', 'infra']);
      assert.equal(processAlive(launcher!.pid!), false, 'the earlier install\'s launcher still runs');
      assert.deepEqual(said, []);
    } finally {
      launcher!.kill('SIGKILL');
    }
  });

  it('ends a run that never got a worker on a second restart (no launcher recorded then)', async () => {
    const { outcome, state } = await followWorkerless();
    assert.deepEqual([ended(outcome).status, ended(outcome).error], ['failed', 'the run\'s worker died']);
    assert.deepEqual([state.status, state.failure.class], ['failed', 'infra']);
  });

  it('waits for the run of a launch whose launcher was never recorded, not interrupted at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      const executor = createLocalExecutor({ cliPath: FAKE_SVC, env: { PATH: process.env.PATH }, pollMs: 20 });
      // That launcher may still be going: it makes the run's folder, then its state, after the server restarted.
      setTimeout(() => {
        mkdirSync(join(dir, '.svc', 'runs', 'r1'), { recursive: true });
        const state = { run: 'r1', status: 'succeeded', started_at: '2026-11-29T12:00:00.000Z', pid: null };
        writeFileSync(join(dir, '.svc', 'runs', 'r1', 'state.json'), JSON.stringify(state));
      }, 300);
      const outcome = await executor.follow({ source: 'local', run: 'r1' }, AbortSignal.timeout(20_000), {
        reattach: true, launching: { launcher: null }, workdir: dir,
      });
      assert.equal(typeof outcome === 'object' && outcome !== null ? outcome.status : outcome, 'succeeded');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs each job without --pr in a worktree of its own, so a second job is not refused the checkout', async () => {
    const repo = makeRepo({ providers: { hold: HOLD_SCRIPT } });
    try {
      const config = readJson(join(repo.repo, '.svc', 'config.json'));
      writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify({ ...config, provider: 'hold' }));
      const env = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}`,
      };
      const executor = createLocalExecutor({ cliPath: CLI, env });
      const args = ['start', '--brief', 'hold the checkout', '--detach'];
      const first = await executor.launch({ run: newRunId(), id: 'job-1', args, workdir: repo.repo });
      assert.equal(first.error, null);
      const second = await executor.launch({ run: newRunId(), id: 'job-2', args, workdir: repo.repo });
      assert.equal(second.error, null);
      writeFileSync(join(repo.home, 'agent-state', 'release'), '');
      for (const { run } of [first, second]) {
        const state = () => readJson(join(repo.repo, '.svc', 'runs', run!.run, 'state.json'));
        await waitFor(() => state().status === 'succeeded', 'the job\'s run to end');
        assert.equal(state().worktree, true);
      }
      assert.equal(readFileSync(join(repo.repo, 'a.txt'), 'utf8'), 'hello\n');
    } finally {
      repo.cleanup();
    }
  });

  // An alert's brief ("Fix errtrack …") and a /jobs brief (--brief) are never an issue URL: no job of theirs fetches.
  it('hands ERRTRACK_AUTH_TOKEN only to a job whose input is an issue URL its origin may fetch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      const env = {
        PATH: process.env.PATH, HOME: dir, ERRTRACK_AUTH_TOKEN: 'k-errtrack-7', SVC_CONTROL_TOKEN: 'k-control-8',
      };
      const executor = createLocalExecutor({ cliPath: FAKE_SVC, env });
      const issue = 'https://acme.sentry.io/issues/42/';
      const jobs: Array<{ origin: string; text: string; brief?: boolean }> = [
        ...['chata', 'chatb', 'trackera', 'trackerb', 'webhook', 'errtrack', 'jobs'].map((origin) => ({ origin, text: 'some text' })),
        { origin: 'chata', text: issue }, { origin: 'errtrack', text: 'Fix errtrack ACME-1: boom' },
        { origin: 'jobs', text: issue, brief: true }, { origin: 'errtrack', text: issue },
      ];
      for (const [i, job] of jobs.entries()) {
        const args = ['start', ...(job.brief ? ['--brief'] : []), job.text, '--pr', '--detach'];
        await executor.launch({ run: newRunId(), id: `job-${i}`, args, origin: job.origin, workdir: dir });
      }
      await executor.answer!({ source: 'local', run: 'r1' }, issue, dir, 'chata');
      const calls = readdirSync(join(dir, 'fake-svc')).filter((n) => n.startsWith('call-'))
        .map((n) => readJson(join(dir, 'fake-svc', n)));
      const handed = calls.filter((c) => c.handed.secrets.ERRTRACK_AUTH_TOKEN !== undefined)
        .map((c) => [c.env.SVC_ORIGIN, c.args.includes(issue), c.args.includes('--brief')]);
      assert.deepEqual(handed, [['errtrack', true, false]]);
      assert.equal(calls.length, jobs.length + 1);
      for (const call of calls) assert.equal(call.handed.secrets.SVC_CONTROL_TOKEN, 'k-control-8');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
