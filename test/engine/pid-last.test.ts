// A run's worker clears its pid as its last write (run-context.ts leave), after its last ship: a resume or an
// --open-pr that comes while the worker still ships the run's end waits for it (launch.ts afterLastWorker), so the
// old worker's last batch reaches the Control Plane before any of the next worker's, and no event goes twice (a
// late ship.json of the old worker would have rolled the new one's offset back). The slow step is real: a stand-in
// Control Plane on loopback that holds the answer to the batch carrying the run's end.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { join } from 'node:path';
import { makeRepo, processesMentioning, readJson, CLI, FAILS_ONCE, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

/** One ingest batch as the stand-in saw it. */
interface Batch {
  arrived: number;
  answered: number;
  status: unknown;
  seqs: unknown[];
  /** It carries the run.status line a resume writes when it queues the run again. */
  resumed: boolean;
}

/** Rejects after `ms` naming `what`: no step of these tests can hang. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A Control Plane's ingest that answers at once, but for a batch carrying a `failed` run while `hold` says so. */
async function standInControl() {
  const seen: Batch[] = [];
  const held: Array<() => void> = [];
  /** `ms`: the first such batch answered that long after it came; `until-released`: each answered by release(). */
  let hold: { ms: number } | 'until-released' | null = null;
  let onHeld: (() => void) | null = null;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.url !== '/v1/ingest') return void answer(res, 404, { error: { code: 'not_found', message: req.url } });
      const batch = JSON.parse(body) as { runs?: Array<{ status?: unknown }>; events?: Array<Record<string, any>> };
      const events = batch.events ?? [];
      const entry: Batch = {
        arrived: Date.now(), answered: NaN, status: batch.runs?.[0]?.status, seqs: events.map((e) => e.seq),
        resumed: events.some((e) => e.kind === 'run.status' && e.data?.resumed === true),
      };
      seen.push(entry);
      const reply = () => {
        entry.answered = Date.now();
        answer(res, 200, { runs: 1, events: events.length, duplicates: 0, artifacts: 0, control: [] });
      };
      if (entry.status !== 'failed' || hold === null) return reply();
      onHeld?.();
      if (hold === 'until-released') return void held.push(reply);
      // Only the first: the old worker's, which its last ship then waits behind.
      setTimeout(reply, hold.ms);
      hold = null;
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    url: `http://127.0.0.1:${address.port}`,
    seen,
    /** Holds the batches carrying the run's failure from now on; resolves once the first of them came. */
    holdFailed(how: { ms: number } | 'until-released'): Promise<void> {
      hold = how;
      return new Promise((resolve) => (onHeld = () => resolve()));
    },
    release(): void {
      hold = null;
      for (const reply of held.splice(0)) reply();
    },
    close(): void {
      server.closeAllConnections();
      server.close();
    },
  };
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  // A request whose sender timed out and went: nothing to answer.
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

describe('a command on a run whose worker still ships its end', () => {
  let repo: TestRepo;
  let control: Awaited<ReturnType<typeof standInControl>>;
  let env: NodeJS.ProcessEnv;
  const runs: string[] = [];
  before(async () => {
    repo = makeRepo({ providers: { 'fails-once': FAILS_ONCE } });
    control = await standInControl();
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url, SVC_SHIP: '1',
      SVC_SANDBOX: 'none' };
  });
  after(() => {
    control.close();
    for (const run of runs) for (const pid of processesMentioning(run)) process.kill(pid, 'SIGKILL');
    repo.cleanup();
  });

  const svc = (args: string[], what: string, ms = 60_000): Promise<ChildResult> =>
    within(runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env }), ms, what);
  const statePath = (run: string) => join(repo.repo, '.svc', 'runs', run, 'state.json');

  /** A run that fails at once, its worker now held in its last ship; with the time the held batch came. */
  async function failingRun(how: { ms: number } | 'until-released'): Promise<string> {
    const held = control.holdFailed(how);
    const started = await svc(['start', '--brief', 'fix', '--worktree', '--detach', '--provider', 'fails-once'],
      'svc start');
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    runs.push(run);
    await within(held, 60_000, 'the worker to ship the run\'s failure');
    return run;
  }

  it('--resume starts the next worker only once the last has shipped the end and left', { timeout: 120_000 },
    async () => {
      const run = await failingRun({ ms: 3_000 });
      const resumed = await svc(['start', '--resume', run, '--detach'], 'svc start --resume');
      assert.equal(resumed.code, 0, resumed.stderr);
      const ended = await waitFor(() => {
        const s = readJson(statePath(run));
        return (s.status === 'succeeded' || s.status === 'failed') && s.pid === null ? s : null;
      }, 'the resumed run to end and its worker to leave');
      assert.equal(ended.status, 'succeeded', ended.error);
      await waitFor(() => control.seen.some((b) => b.status === 'succeeded' && b.answered > 0),
        'the resumed run\'s end to be shipped');
      const last = control.seen.find((b) => b.status === 'failed');
      assert.ok(last);
      await waitFor(() => last.answered > 0, 'the old worker\'s held batch to be answered');
      assert.ok(last.answered - last.arrived >= 2_900, 'the old worker\'s batch was held');
      const early = control.seen.filter((b) => b.resumed && b.arrived < last.answered);
      assert.deepEqual(early, [], 'no batch of the resume came before the old worker\'s last was answered');
      const seqs = control.seen.flatMap((b) => b.seqs);
      assert.equal(new Set(seqs).size, seqs.length, `each event shipped once: ${seqs.join(' ')}`);
    });

  it('--open-pr waits for that worker, then refuses it by its pid as a conflict (exit 1)', { timeout: 120_000 },
    async () => {
      const run = await failingRun('until-released');
      try {
        const asked = Date.now();
        const res = await svc(['start', '--open-pr', run], 'svc start --open-pr', 30_000);
        assert.equal(res.code, 1, res.stderr);
        assert.match(res.stderr, /its worker \(pid \d+\) is still finishing: open its pull request once that has/);
        assert.ok(Date.now() - asked >= 9_500, 'it waited for the worker first');
        assert.equal(readJson(statePath(run)).status, 'failed');
      } finally {
        control.release();
      }
      const left = await waitFor(() => {
        const s = readJson(statePath(run));
        return s.pid === null ? s : null;
      }, 'the worker to leave once its last ship was answered');
      assert.equal(left.status, 'failed');
    });
});
