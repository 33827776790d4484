// A resume's launcher queues the run again and its worker runs it only from there: a stop that comes while the worker
// starts, before it wrote `running`, ends the run stopped and its agent never runs again (before, the stop found the
// run it resumed from, already ended, signalled nothing, and the resumed run went on); a worker that does not start
// leaves the run as it was.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { prepareRun, spawnWorker } from '../../src/engine/launch.ts';
import { stopLocalRun } from '../../src/engine/run-context.ts';
import { identityOf } from '../../src/proc-stat.ts';
import { readState, writeState, type RunState } from '../../src/engine/run-state.ts';
import { runFailure } from '../../src/run-json.ts';
import { ConflictError } from '../../src/errors.ts';
import { repoForTests } from './fixtures.ts';

interface OtlpBody {
  resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{
    name: string; status: { code: number }; attributes: Array<{ key: string; value: unknown }>;
  }> }> }>;
}

const CLI_TS = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

describe('resuming a run', () => {
  // A checkout each: a run one test leaves unended would hold it for the next.
  const t = repoForTests({}, { SVC_SANDBOX: 'none' }, true);

  /** A run stopped before its worker ever started (what a resume moves on from), with `over` in its state. */
  async function stoppedRun(
    over: Partial<RunState> = {}, env = t.env,
  ): Promise<{ dir: string; state: RunState }> {
    const { state } = await prepareRun({
      input: 'append fixed', forceBrief: true, pr: false, worktree: false, provider: 'fake', repo: t.repo, runId: null,
      env,
    });
    const dir = join(t.repo, '.svc', 'runs', state.run);
    const ended_at = new Date().toISOString();
    const stopped: RunState = {
      ...state, status: 'stopped', ended_at, failure: runFailure('stopped', 'stopped by a test'), ...over,
    };
    writeState(dir, stopped);
    return { dir, state: stopped };
  }

  // A run that ships (the fixtures' SVC_SHIP=0 keeps a run local, and a local run is never marked pending).
  const shipping = () => ({ ...t.env, SVC_SHIP: '1' });
  const agentRan = () => readFileSync(join(t.repo, 'a.txt'), 'utf8') !== 'hello\n';
  const statusEvents = (dir: string) => readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n')
    .map((line) => JSON.parse(line) as { kind: string; data: Record<string, unknown> })
    .filter((e) => e.kind === 'run.status').map((e) => e.data);

  it('ends the resumed run stopped when a stop comes while its worker starts, its agent not run again', async () => {
    const { dir, state } = await stoppedRun();
    const worker = spawnWorker(readState(dir), 'resume', t.env, false);
    const exited = once(worker, 'exit');
    await stopLocalRun(t.repo, state.run, 'svc start --stop');
    await exited;
    const final = readState(dir);
    assert.deepEqual([final.status, final.failure], ['stopped', runFailure('stopped', 'stopped by svc start --stop')]);
    assert.equal(agentRan(), false, 'the agent ran');
  });

  it('queues it with no worker nor child of before, so a stop then finds no dead worker to fail it', async () => {
    // Its earlier worker and agent, both gone: a stop that took that pid for the run's would end it failed.
    const gone = spawn('sleep', ['300']);
    const identity = identityOf(gone.pid!);
    gone.kill('SIGKILL');
    await once(gone, 'exit');
    const child = { ...identity, init: { pid: 99, proc_start: '1' } };
    const { dir, state } = await stoppedRun({ ...identity, child });
    const worker = spawnWorker(readState(dir), 'resume', t.env, false);
    const exited = once(worker, 'exit');
    const queued = readState(dir);
    assert.deepEqual([queued.status, queued.pid, queued.child], ['queued', worker.pid, null]);
    await stopLocalRun(t.repo, state.run, 'svc start --stop');
    await exited;
    assert.equal(readState(dir).status, 'stopped');
    assert.equal(agentRan(), false, 'the agent ran');
  });

  it('leaves a run as it was when its worker cannot start: its log a link, or its spawn refused', async () => {
    const { dir, state } = await stoppedRun({}, shipping());
    symlinkSync('/dev/null', join(dir, 'worker.log'));
    assert.throws(() => spawnWorker(readState(dir), 'resume', t.env, false), /symbolic link/);
    assert.deepEqual(readState(dir), state);
    // A value no process can be given (a NUL byte): the spawn throws once the run is queued again.
    assert.throws(() => spawnWorker(readState(dir), 'resume', { ...t.env, HOME: 'a\0b' }, true));
    const after = readState(dir);
    assert.deepEqual({ ...after, updated_at: state.updated_at }, state);
    assert.deepEqual(statusEvents(dir).slice(1), [
      { from: 'stopped', to: 'queued', resumed: true }, { from: 'queued', to: 'stopped', resumed: true },
    ]);
    assert.ok(existsSync(join(t.repo, '.svc', 'ship-pending', state.run)), 'marked for the next svc command to ship');
  });

  it('puts a run back when its worker\'s spawn fails later, with no pid (its program missing)', async () => {
    const { dir, state } = await stoppedRun({}, shipping());
    // The usual failure (ENOENT, EACCES, EAGAIN) is no throw: a child with no pid, and an 'error' event after.
    const execPath = process.execPath;
    process.execPath = join(t.home, 'no-such-node');
    let worker: ReturnType<typeof spawnWorker>;
    try {
      worker = spawnWorker(readState(dir), 'resume', t.env, false);
    } finally {
      process.execPath = execPath;
    }
    const [err] = await once(worker, 'error') as [NodeJS.ErrnoException];
    assert.equal(err.code, 'ENOENT');
    assert.equal(worker.pid, undefined);
    const after = readState(dir);
    assert.deepEqual({ ...after, updated_at: state.updated_at }, state);
    assert.deepEqual(statusEvents(dir).slice(1), [
      { from: 'stopped', to: 'queued', resumed: true }, { from: 'queued', to: 'stopped', resumed: true },
    ]);
    assert.ok(existsSync(join(t.repo, '.svc', 'ship-pending', state.run)), 'marked for the next svc command to ship');
  });

  it('refuses a second resume that read the run before the first queued it, the first\'s worker kept', async () => {
    const { dir } = await stoppedRun();
    const stale = readState(dir);
    const first = spawnWorker(stale, 'resume', t.env, false);
    const exited = once(first, 'exit');
    assert.throws(() => spawnWorker(stale, 'resume', t.env, false), (err: Error) => err instanceof ConflictError &&
      /^Run \S+ is (queued|running); only stopped or failed runs can be resumed$/.test(err.message));
    assert.equal(readState(dir).pid, first.pid);
    await exited;
    assert.equal(readState(dir).status, 'succeeded');
  });

  it('runs nothing in a worker that finds its run not queued (failed by a stop, or stopped)', async () => {
    for (const status of ['failed', 'stopped'] as const) {
      const failure = runFailure(status === 'failed' ? 'infra' : 'stopped', 'ended by a test');
      const { dir, state } = await stoppedRun({ status, failure });
      const worker = spawn(process.execPath, [CLI_TS, 'worker', 'resume', '--run-id', state.run, '--repo', t.repo],
        { stdio: 'ignore', env: t.env });
      const [code] = await once(worker, 'exit');
      assert.equal(code, 1);
      assert.deepEqual([readState(dir).status, readState(dir).failure], [status, failure]);
      assert.equal(agentRan(), false, `the agent ran in a run found ${status}`);
    }
  });

  it('ends a svc.run span (error, its svc.status) in a worker that finds its run stopped', async () => {
    const bodies: string[] = [];
    const collector = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
      req.on('end', () => { bodies.push(body); res.end('{}'); });
    });
    collector.listen(0, '127.0.0.1');
    await once(collector, 'listening');
    try {
      const { state } = await stoppedRun();
      const { port } = collector.address() as AddressInfo;
      const worker = spawn(process.execPath, [CLI_TS, 'worker', 'resume', '--run-id', state.run, '--repo', t.repo],
        { stdio: 'ignore', env: { ...t.env, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` } });
      await once(worker, 'exit');
      const spans = bodies.flatMap((body) => (JSON.parse(body) as OtlpBody).resourceSpans
        .flatMap((r) => r.scopeSpans.flatMap((scope) => scope.spans)));
      const run = spans.find((span) => span.name === 'svc.run');
      assert.ok(run, 'no svc.run span');
      assert.equal(run.status.code, 2);
      assert.deepEqual(run.attributes.find((a) => a.key === 'svc.status')?.value, { stringValue: 'stopped' });
    } finally {
      collector.close();
    }
  });

  it('says `resumed` in its moves to queued and running, which are no first start', async () => {
    const { dir } = await stoppedRun();
    const worker = spawnWorker(readState(dir), 'resume', t.env, false);
    const [code] = await once(worker, 'exit');
    assert.equal(code, 0);
    assert.equal(readState(dir).status, 'succeeded');
    assert.deepEqual(statusEvents(dir).slice(1), [
      { from: 'stopped', to: 'queued', resumed: true }, { from: 'queued', to: 'running', resumed: true },
      { from: 'running', to: 'succeeded' },
    ]);
  });
});
