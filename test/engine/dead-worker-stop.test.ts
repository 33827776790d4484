// `svc start --stop` (and the Control Plane's stop) of a run whose worker died without ending it (kill -9, out of
// memory, a reboot): the run ends failed, class infra, with the cost its provider had reported, and is marked to be
// shipped, since no worker will ship it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { stopLocalRun } from '../../src/engine/run-context.ts';
import { identityOf, statFields } from '../../src/proc-stat.ts';
import { createRunController } from '../../src/control/run-controller.ts';
import { createLogger } from '../../src/log.ts';
import type { EventRow } from '../../src/db/events-store.ts';
import { memoryControlStores } from '../helpers/memory-stores.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { processesMentioning } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

const HELD_WORKER = fileURLToPath(new URL('../helpers/held-sandbox-worker.ts', import.meta.url));

const ENDED = { cost_usd: 0.5, tokens_in: 100, tokens_out: 10 };
// What the worker's budget check wrote to state.json during the attempt it died in (its total every 150 ms).
const IN_FLIGHT = { cost_usd: 0.875, tokens_in: 124, tokens_out: 13 };

describe('stopping a run whose worker died', () => {
  it('ends it failed (infra) with the cost of the attempt it was in, and marks it to be shipped', async () => {
    await stopsDeadRun(IN_FLIGHT);
  });

  it('rebuilds the attempt from its svc.cost lines when the state had not caught up with them', async () => {
    await stopsDeadRun(ENDED);
  });

  it("rebuilds a cost event's token count that is no whole number as unknown, keeping the rest", async () => {
    const repo = mkdtempSync(join(tmpdir(), 'svc-dead-worker-'));
    try {
      const run = 'r20261129120000aaaaaaab';
      const dir = await writeDeadRun(repo, run, { cost_usd: null, tokens_in: null, tokens_out: null } as never);
      const event = { seq: 1, ts: '2026-11-29T12:00:00.000Z', kind: 'cost', data: { usd: 0.5, tokens_in: 100.5,
        tokens_out: 10 } };
      writeFileSync(join(dir, 'events.jsonl'), `${JSON.stringify(event)}\n`);
      const state = await stopLocalRun(repo, run, 'svc start --stop');
      assert.deepEqual([state?.cost_usd, state?.tokens_in, state?.tokens_out], [0.5, null, 10]);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });
});

describe('stopping a run that never got a worker', () => {
  /** Queued a day ago and still without a worker (its launcher died), stopped by `svc start --stop [--worker-lost]`. */
  async function stopWorkerless(workerLost: boolean) {
    const repo = mkdtempSync(join(tmpdir(), 'svc-workerless-'));
    try {
      const run = 'r20261129120000cccccccc';
      const dir = join(repo, '.svc', 'runs', run);
      mkdirSync(dir, { recursive: true });
      const day = '2026-11-29T12:00:00.000Z';
      writeFileSync(join(dir, 'state.json'), JSON.stringify({
        run, status: 'queued', provider: 'mycli', repo_path: repo, started_at: day, updated_at: day,
        pid: null, pgid: null, proc_start: null, child: null,
      }));
      return await stopLocalRun(repo, run, 'svc start --stop', workerLost);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  }

  it('ends it stopped when a person stops it: nobody found a worker dead', async () => {
    const state = await stopWorkerless(false);
    assert.deepEqual([state?.status, state?.failure?.class, state?.failure?.reason],
      ['stopped', 'stopped', 'stopped by svc start --stop']);
  });

  it('ends it failed (infra) when the trigger server that follows it found it lost (--worker-lost)', async () => {
    const state = await stopWorkerless(true);
    assert.deepEqual([state?.status, state?.failure?.class], ['failed', 'infra']);
  });
});

describe('the Control Plane stopping a run whose worker died', () => {
  const { db, stores } = memoryControlStores();

  it('records it failed and publishes the transition to failed, the status it wrote', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'svc-dead-worker-'));
    try {
      const run = 'r20261129120000bbbbbbbb';
      await writeDeadRun(repo, run, ENDED);
      stores.runs.upsert('local', { run, status: 'stopping', started_at: Date.now(), repo_path: repo });
      const published: EventRow[] = [];
      const controller = createRunController({
        db, stores, bus: { publish: (rows) => published.push(...rows) },
        settings: { source: 'local', answerDir: repo, token: 't' }, env: {}, clock: Date.now,
        log: createLogger('test', () => {}), url: () => 'http://127.0.0.1:1',
      });
      await controller.stop(stores.runs.get('local', run)!);
      assert.equal(stores.runs.get('local', run)?.status, 'failed');
      assert.deepEqual(published.map((e) => JSON.parse(e.data)), [{ from: 'stopping', to: 'failed' }]);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });
});

// The worker records its agent's sandbox init as soon as bwrap reports it: killed (SIGKILL, out of memory) while bwrap
// set the sandbox up, it never ended that init, which ignores the stop's SIGTERM, outlives bwrap and starts the agent.
describe('stopping a run whose worker died while its sandbox was set up', () => {
  it('ends the sandbox, agent and all', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, async () => {
    const run = 'r20261129120000cccccccc';
    await endsHeldSandbox(run, 'the stop', async (worker, repo, { init, outer }) => {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
      const stop = stopLocalRun(repo, run, 'svc start --stop');
      while (/^[RSD]$/.test(statFields(outer)?.[0] ?? '')) await sleep(10);
      process.kill(init, 'SIGCONT');
      assert.equal((await stop)?.status, 'failed');
    });
  });
});

// With nobody left to stop it: bwrap dies with its worker, and the init, past its setup, ties itself to a bwrap
// already gone, a tie that never fires. Its agent's lifeline (spawn-group.ts), closed with the worker, ends it.
describe('a worker killed while its sandbox is set up, with no stop after', () => {
  const skip = bwrapWorks ? false : 'bwrap cannot run on this host';

  it('leaves nothing of the sandbox running (SIGKILL)', { skip }, async () => {
    await endsHeldSandbox('r20261129120000eeeeeeee', 'its worker was killed', async (worker, _repo, held) => {
      const { init, outer } = held;
      worker.kill('SIGKILL');
      await once(worker, 'exit');
      while (/^[RSD]$/.test(statFields(outer)?.[0] ?? '')) await sleep(10);
      process.kill(init, 'SIGCONT');
    });
  });

  // `pkill -f <run folder>`: bwrap first (its argv names the folder), its worker next, before it saw bwrap end.
  it('leaves nothing of the sandbox running (SIGTERM to bwrap and its worker)', { skip }, async () => {
    await endsHeldSandbox('r20261129120000ffffffff', 'both were sent SIGTERM', async (worker, _repo, held) => {
      const { init, outer } = held;
      process.kill(outer, 'SIGTERM');
      worker.kill('SIGTERM');
      await once(worker, 'exit');
      while (/^[RSD]$/.test(statFields(outer)?.[0] ?? '')) await sleep(10);
      process.kill(init, 'SIGCONT');
    });
  });
});

describe('a worker that exits while its sandbox is set up', () => {
  it('ends the sandbox\'s init on its way out, before it saw bwrap end', {
    skip: bwrapWorks ? false : 'bwrap cannot run on this host',
  }, async () => {
    await endsHeldSandbox('r20261129120000dddddddd', 'its worker left', async (worker) => {
      const exited = once(worker, 'exit');
      worker.stdin!.end('exit\n');
      assert.deepEqual((await exited)[0], 0);
    });
  });
});

/**
 * A run in a new project whose stand-in worker holds its sandbox in setup; `act` ends the worker its way, after which
 * (`after`) no process of the sandbox may run 5 s on.
 */
async function endsHeldSandbox(
  run: string, after: string,
  act: (worker: ChildProcess, repo: string, held: { init: number; outer: number }) => Promise<void>,
): Promise<void> {
  const repo = mkdtempSync(join(tmpdir(), 'svc-dead-worker-'));
  const tag = `127.${process.pid}${Date.now() % 1000}`;
  const dir = join(repo, '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'state.json'), JSON.stringify({
    run, status: 'queued', provider: 'mycli', started_at: '2026-11-29T12:00:00.000Z', child: null, repo_path: repo,
  }));
  const worker = spawn(process.execPath, [HELD_WORKER, dir, tag], {
    detached: true, stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    // A worker that ends before it reports fails the test rather than leaving it waiting for ever.
    const [line] = await Promise.race([once(worker.stdout!.setEncoding('utf8'), 'data') as Promise<[string]>,
      once(worker, 'exit').then(([code, signal]) => {
        throw new Error(`the stand-in worker ended (${code ?? signal}) before it held the sandbox`);
      })]);
    await act(worker, repo, JSON.parse(line) as { init: number; outer: number });
    // The sandbox's sleep lasts 127 s: gone before then, it was ended, however loaded the machine.
    await waitFor(() => processesMentioning(tag).length === 0, `every process of the sandbox to end after ${after}`);
  } finally {
    worker.kill('SIGKILL');
    for (const pid of processesMentioning(tag)) process.kill(pid, 'SIGKILL');
    rmSync(repo, { recursive: true, force: true });
  }
}

/** A run folder in `repo` whose worker (a real process, now gone) died while running with `reported`. */
async function writeDeadRun(repo: string, run: string, reported: typeof ENDED): Promise<string> {
  const worker = spawn('sleep', ['300']);
  const identity = identityOf(worker.pid!);
  worker.kill('SIGKILL');
  await once(worker, 'exit');
  const dir = join(repo, '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'state.json'), JSON.stringify({
    run, status: 'running', provider: 'mycli', started_at: '2026-11-29T12:00:00.000Z', child: null,
    reported, metered: null, ...reported, ...identity,
  }));
  return dir;
}

/** A run whose worker died with `reported` in its state.json, stopped: its cost is the in-flight attempt's, once. */
async function stopsDeadRun(reported: typeof ENDED): Promise<void> {
  const repo = mkdtempSync(join(tmpdir(), 'svc-dead-worker-'));
  try {
    const run = 'r20261129120000aaaaaaaa';
    const dir = await writeDeadRun(repo, run, reported);
    // One ended attempt, then the attempt the worker died in: its `svc.cost` lines only.
    const events = [
      { kind: 'cost', data: { usd: 0.5, tokens_in: 100, tokens_out: 10, total_usd: 0.5 } },
      { kind: 'log', data: { stream: 'stdout', text: '{"type":"svc.cost","usd":0.25,"tokens_in":20,"tokens_out":2}' } },
      { kind: 'log', data: { stream: 'stdout', text: 'working…' } },
      { kind: 'log', data: { stream: 'stdout', text: '{"type":"svc.cost","usd":0.125,"tokens_in":4,"tokens_out":1}' } },
    ];
    writeFileSync(join(dir, 'events.jsonl'),
      events.map((e, i) => JSON.stringify({ seq: i + 1, ts: '2026-11-29T12:00:00.000Z', ...e })).join('\n') + '\n');

    const state = await stopLocalRun(repo, run, 'svc start --stop');
    assert.ok(state);
    assert.equal(state.status, 'failed');
    assert.equal(state.failure?.class, 'infra');
    assert.match(state.failure?.reason ?? '', /worker died/);
    assert.equal(state.cost_usd, 0.875);
    assert.equal(state.tokens_in, 124);
    assert.equal(state.tokens_out, 13);
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')).status, 'failed');
    assert.ok(existsSync(join(repo, '.svc', 'ship-pending', run)), 'marked for the next svc command to ship');
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
}
