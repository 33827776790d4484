// A run's worker and its foreground launcher end once the run is final, whatever handle something left open in them:
// a listening socket, put there by a module every svc process of the test preloads (NODE_OPTIONS --import).
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CLI, EDIT_SCRIPT, SLEEP_SCRIPT, processesMentioning, repoForTests } from './fixtures.ts';
import type { RunState } from '../../src/engine/run-state.ts';
import { tryReadState } from '../../src/engine/run-state.ts';
import { runDir } from '../../src/engine/paths.ts';
import { closedPort } from '../helpers/closed-port.ts';

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
// child and puts its plan back: its handlers run at that point as they would for a signal the kernel delivered there.
const TERM_AT_END = `if (process.argv[2] === 'worker') {
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => {
    const written = write(chunk, ...rest);
    if (String(chunk).includes('] status succeeded')) process.emit('SIGTERM', 'SIGTERM');
    return written;
  };
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

/** The run's state once its worker has written its end (its pid cleared): all that is left is its last ship. */
async function endWritten(child: ChildProcess, repo: string, out: () => string): Promise<RunState> {
  for (;;) {
    const run = /"run":"([^"]+)"/.exec(out())?.[1];
    const state = run ? tryReadState(runDir(repo, run)) : null;
    if (state && state.status === 'succeeded' && state.pid === null) return state;
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
    const held: IncomingMessage[] = [];
    const control = createServer((req) => void held.push(req));
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
      // A worker that took the signal as a stop would have gone on to its last ship and sat out the client's
      // timeout, then tried again: at most the periodic ship reached the stand-in, never a second request.
      assert.ok(held.length <= 1, `the last ship was not tried (${held.length} requests)`);
      assert.match(started.stdout(), /"status":"succeeded"/);
      assert.deepEqual(processesMentioning(run), [], 'the worker is gone too');
      assert.ok(existsSync(join(repo.repo, '.svc', 'ship-pending', run)), 'the run waits for the next ship');
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
});
