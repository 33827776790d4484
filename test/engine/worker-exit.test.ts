// A run's worker and its foreground launcher end once the run is final, whatever handle something left open in them:
// a listening socket, put there by a module every svc process of the test preloads (NODE_OPTIONS --import).
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CLI, EDIT_SCRIPT, SLEEP_SCRIPT, processesMentioning, repoForTests } from './fixtures.ts';
import type { RunState } from '../../src/engine/run-state.ts';
import { tryReadState } from '../../src/engine/run-state.ts';
import { runDir } from '../../src/engine/paths.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { waitFor } from '../helpers/wait-for.ts';

const LEAK = `import { createServer } from 'node:net';
if (['worker', 'start'].includes(process.argv[2] ?? '')) createServer().listen(0, '127.0.0.1');
`;

// A worker that takes no notice of a stop: its first SIGTERM handler blocks its only thread for good (a worker stuck
// in a synchronous call), so neither its own handlers nor its exit hook ever run. Its launcher is left alone.
const STALL = `process.on('SIGTERM', () => {
  if (process.argv[2] === 'worker') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
});
`;

// A SIGTERM the worker takes the moment it says its run's final status (on disk by then), before it clears its pid and
// child and puts its plan back. The emit stands in for a signal arriving while the egress gate closes there, the only
// point in that window where a real one is handled (a sandboxed run; without a sandbox those writes do not yield).
const TERM_AT_END = `if (process.argv[2] === 'worker') {
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => {
    const written = write(chunk, ...rest);
    if (String(chunk).includes('] status succeeded')) process.emit('SIGTERM', 'SIGTERM');
    return written;
  };
}
`;

// The worker holds still once it has said its run's final status, its pid still recorded, until its launcher has
// taken a SIGINT (the launcher says so in GO once its own handlers ran), and notes in GOT any SIGINT it is sent.
const HOLD_AT_END = `import { existsSync, writeFileSync } from 'node:fs';
const { GO, GOT } = process.env;
if (process.argv[2] === 'start') process.on('SIGINT', () => setImmediate(() => writeFileSync(GO, '')));
if (process.argv[2] === 'worker') {
  process.on('SIGINT', () => writeFileSync(GOT, ''));
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => {
    const written = write(chunk, ...rest);
    if (!String(chunk).includes('] status succeeded')) return written;
    while (!existsSync(GO)) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    return written;
  };
}
`;

// The launcher dies the moment it has recorded its worker's pid (a restarted trigger server ends a launch it lost, and
// the launcher may not have run since that write): killed there, before it runs another line.
const DIE_AFTER_WORKER = `import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
if (process.argv[2] === 'start') {
  const rename = fs.renameSync;
  fs.renameSync = (from, to) => {
    rename(from, to);
    const text = String(to).endsWith('state.json') ? fs.readFileSync(to, 'utf8') : '';
    if (/"pid": \\d/.test(text)) process.kill(process.pid, 'SIGKILL');
  };
  syncBuiltinESMExports();
}
`;

// What a worker or launcher that does not end (the failure these tests look for) leaves: ended after the tests.
const leftovers: string[] = [];
const launchers: ChildProcess[] = [];
after(() => {
  for (const run of leftovers) for (const pid of processesMentioning(run)) process.kill(pid, 'SIGKILL');
  for (const launcher of launchers) launcher.kill('SIGKILL');
});

/** `svc start` in the foreground, every svc process of it holding a socket nothing closes. */
function startLeaking(
  repo: { root: string; repo: string; env: NodeJS.ProcessEnv }, env: NodeJS.ProcessEnv = {}, provider = 'fake',
  preload = LEAK,
) {
  const leak = join(repo.root, preload === LEAK ? 'leak.mjs' : 'preload.mjs');
  writeFileSync(leak, preload);
  const child = spawn(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', provider], {
    cwd: repo.repo, env: { ...repo.env, SVC_SANDBOX: 'none', NODE_OPTIONS: `--import=${leak}`, ...env },
  });
  launchers.push(child);
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.resume();
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, exited, stdout: () => stdout };
}

/** The run's state once its worker has written its end: all that is left is its last ship, then its pid's clear (its
 * last write, after that ship: the ship may be held by a Control Plane that never answers). */
async function endWritten(child: ChildProcess, repo: string, out: () => string): Promise<RunState> {
  for (;;) {
    const run = /"run":"([^"]+)"/.exec(out())?.[1];
    const state = run ? tryReadState(runDir(repo, run)) : null;
    if (state && state.status === 'succeeded') return state;
    assert.equal(child.exitCode, null, 'svc start is still there until its run ends');
    await sleep(50);
  }
}

/** The run's state once its agent (the sleeping provider) is recorded as its child. */
async function agentRunning(child: ChildProcess, repo: string, out: () => string): Promise<RunState> {
  for (;;) {
    const run = /"run":"([^"]+)"/.exec(out())?.[1];
    const state = run ? tryReadState(runDir(repo, run)) : null;
    if (state?.child) return state;
    assert.equal(child.exitCode, null, 'svc start is still there while its agent sleeps');
    await sleep(50);
  }
}

/** The body a request brings, as far as it came before its sender went. */
function bodyOf(req: IncomingMessage): Promise<string> {
  let body = '';
  req.on('data', (chunk: Buffer) => (body += chunk.toString()));
  return new Promise((resolve) => req.once('close', () => resolve(body)));
}

/** The statuses of `run` that ingest bodies carry (a launcher ships earlier runs to the same stand-in too). */
function shippedStatuses(bodies: string[], run: string): unknown[] {
  return bodies.flatMap((body) => {
    try {
      const parsed: unknown = JSON.parse(body);
      const runs = parsed && typeof parsed === 'object' && 'runs' in parsed ? parsed.runs : [];
      if (!Array.isArray(runs)) return [];
      return runs.flatMap((row: unknown) => row && typeof row === 'object' && 'run' in row && row.run === run
        && 'status' in row ? [row.status] : []);
    } catch {
      // A body cut short when its sender ended: read as the final status if it could be one.
      return body.includes(run) && body.includes('"status":"succeeded"') ? ['succeeded'] : [];
    }
  });
}

describe("a run's worker and its launcher at the run's end", () => {
  const repo = repoForTests({ providers: { fake: EDIT_SCRIPT, sleepy: SLEEP_SCRIPT } }, {}, true);

  it('end by themselves with the run\'s exit code, a socket left listening in each', { timeout: 60_000 }, async () => {
    const started = startLeaking(repo);
    const state = await endWritten(started.child, repo.repo, started.stdout);
    leftovers.push(state.run);
    assert.deepEqual(await started.exited, [0, null]);
    assert.match(started.stdout(), /"status":"succeeded"/);
    assert.deepEqual(processesMentioning(state.run), [], 'the worker is gone too');
  });

  it('end at once on a SIGTERM while the final ship waits on a Control Plane that never answers, and keep the ' +
    'run for the next ship', { timeout: 60_000 }, async () => {
    const held: IncomingMessage[] = [];
    const control = createServer((req) => void held.push(req));
    control.listen(0, '127.0.0.1');
    await once(control, 'listening');
    try {
      const address = control.address();
      assert.ok(address && typeof address === 'object');
      const started = startLeaking(repo, { SVC_SHIP: '1', SVC_CONTROL_URL: `http://127.0.0.1:${address.port}` });
      const state = await endWritten(started.child, repo.repo, started.stdout);
      leftovers.push(state.run);
      // The stand-in holds the first ship that reaches it, most often a periodic one the last ship waits behind.
      while (held.length === 0) await sleep(50);
      started.child.kill('SIGTERM');
      assert.deepEqual(await started.exited, [0, null]);
      // A worker that sat out the Control Plane client's timeout would have tried its last ship again (then marked it
      // pending and ended anyway): the signal ended it while it waited on that first request.
      assert.deepEqual(held.map((req) => req.method), ['POST'], 'the signal, not a timeout, ended the last ship');
      assert.match(started.stdout(), /"status":"succeeded"/);
      assert.deepEqual(processesMentioning(state.run), [], 'the worker is gone too');
      assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', state.run)), 'the run waits for the next ship');
    } finally {
      control.closeAllConnections();
      control.close();
    }
  });

  it('end at once on a SIGTERM between the run\'s final status and the writes after it, and keep the run for the ' +
    'next ship, a Control Plane that never answers', { timeout: 60_000 }, async () => {
    const bodies: Array<Promise<string>> = [];
    const control = createServer((req) => void bodies.push(bodyOf(req)));
    control.listen(0, '127.0.0.1');
    await once(control, 'listening');
    try {
      const address = control.address();
      assert.ok(address && typeof address === 'object');
      const url = `http://127.0.0.1:${address.port}`;
      const started = startLeaking(repo, { SVC_SHIP: '1', SVC_CONTROL_URL: url }, 'fake', TERM_AT_END);
      assert.deepEqual(await started.exited, [0, null]);
      const run = /"run":"([^"]+)"/.exec(started.stdout())?.[1];
      assert.ok(run);
      leftovers.push(run);
      const final = tryReadState(runDir(repo.repo, run));
      assert.equal(final?.status, 'succeeded');
      assert.equal(final?.pid, null);
      assert.equal(final?.child, null);
      // A worker that took the signal as a stop would have gone on to its last ship, the run's final status in it:
      // a periodic ship (the run still working) may have reached the stand-in, never that one.
      assert.deepEqual(shippedStatuses(await Promise.all(bodies), run).filter((status) => status === 'succeeded'), [],
        'the last ship was not tried');
      assert.match(started.stdout(), /"status":"succeeded"/);
      assert.deepEqual(processesMentioning(run), [], 'the worker is gone too');
      assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', run)), 'the run waits for the next ship');
    } finally {
      control.closeAllConnections();
      control.close();
    }
  });

  it('hand a SIGINT to the worker once the run\'s status is final, its pid still recorded, rather than stop the run',
    { timeout: 60_000 }, async () => {
      // A Control Plane that never answers.
      const control = createServer(() => undefined);
      control.listen(0, '127.0.0.1');
      await once(control, 'listening');
      try {
        const address = control.address();
        assert.ok(address && typeof address === 'object');
        const [go, got] = [join(repo.root, 'go'), join(repo.root, 'got')];
        const env = { SVC_SHIP: '1', SVC_CONTROL_URL: `http://127.0.0.1:${address.port}`, GO: go, GOT: got };
        const started = startLeaking(repo, env, 'fake', HOLD_AT_END);
        let state: RunState | null = null;
        while (state?.status !== 'succeeded' || state.pid === null) {
          assert.equal(started.child.exitCode, null, 'svc start is still there until its run ends');
          await sleep(50);
          const run = /"run":"([^"]+)"/.exec(started.stdout())?.[1];
          state = run ? tryReadState(runDir(repo.repo, run)) : null;
        }
        leftovers.push(state.run);
        started.child.kill('SIGINT');
        // A stop of a final run does nothing: the launcher would have waited out the worker's last ship to a
        // Control Plane that never answers, the worker never signalled.
        assert.deepEqual(await started.exited, [0, null]);
        assert.ok(existsSync(got), 'the worker was handed the SIGINT');
        assert.equal(tryReadState(runDir(repo.repo, state.run))?.status, 'succeeded');
        assert.deepEqual(processesMentioning(state.run), [], 'the worker is gone too');
        assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', state.run)), 'the run waits for the next ship');
      } finally {
        control.closeAllConnections();
        control.close();
      }
    });

  it('stop the run on a SIGINT while it works, and exit only once the stopper has written its end', {
    timeout: 60_000,
  }, async () => {
    // A run that ships (a run kept local gets no marker), to a Control Plane that is not there.
    const url = `http://127.0.0.1:${await closedPort()}`;
    const started = startLeaking(repo, { SVC_SHIP: '1', SVC_CONTROL_URL: url }, 'sleepy');
    const state = await agentRunning(started.child, repo.repo, started.stdout);
    leftovers.push(state.run);
    started.child.kill('SIGINT');
    assert.deepEqual(await started.exited, [1, null]);
    const final = tryReadState(runDir(repo.repo, state.run));
    assert.equal(final?.status, 'stopped');
    assert.equal(final?.failure?.reason, 'stopped by an interrupt of svc start');
    assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', state.run)), 'the stop waits for the next ship');
  });

  it('stop the run on a SIGINT whose worker ignores the stop past its grace: the worker is killed, the agent ' +
    'with it, and svc start exits 1 once the stop is on disk', { timeout: 90_000 }, async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const started = startLeaking(repo, { SVC_SHIP: '1', SVC_CONTROL_URL: url }, 'sleepy', STALL);
    const state = await agentRunning(started.child, repo.repo, started.stdout);
    leftovers.push(state.run);
    started.child.kill('SIGINT');
    assert.deepEqual(await started.exited, [1, null]);
    const final = tryReadState(runDir(repo.repo, state.run));
    assert.equal(final?.status, 'stopped');
    assert.equal(final?.failure?.reason, 'stopped by an interrupt of svc start');
    assert.equal(final?.pid, null);
    assert.equal(final?.child, null);
    assert.match(started.stdout(), /"status":"stopped"/);
    assert.deepEqual(processesMentioning(state.run), [], 'neither the worker nor anything of the agent is left');
    assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', state.run)), 'the stop waits for the next ship');
  });

  it('leave a run to its worker when the launcher dies right after recording it, before another line of it ran',
    { timeout: 60_000 }, async () => {
    const preload = join(repo.root, 'preload.mjs');
    writeFileSync(preload, DIE_AFTER_WORKER);
    const child = spawn(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake', '--detach'], {
      cwd: repo.repo, env: { ...repo.env, SVC_SANDBOX: 'none', NODE_OPTIONS: `--import=${preload}` }, stdio: 'ignore',
    });
    launchers.push(child);
    assert.deepEqual(await once(child, 'exit'), [null, 'SIGKILL']);
    const [run] = readdirSync(join(repo.repo, '.svc', 'runs'));
    assert.ok(run, 'the launcher made its run');
    leftovers.push(run);
    const dir = runDir(repo.repo, run);
    const worker = tryReadState(dir)?.pid;
    assert.ok(typeof worker === 'number', 'the launcher recorded its worker');
    await waitFor(() => processesMentioning(run).length === 0, 'the worker to end');
    // The secrets it was handed (none here: the message is still its go-ahead) were in its pipe before that record.
    const state = tryReadState(dir);
    assert.equal(state?.status, 'succeeded', readFileSync(join(dir, 'worker.log'), 'utf8'));
  });
});
