// Path (a)'s walk, measured as docs/architecture.md counts it: the src/ modules whose code a second signed GitHub
// delivery runs under V8's precise coverage, up to the moment `startChild` makes its job's `svc start` child, less the
// pipeline's internals, the shared leaves and what only counts or traces. The doc's numbered list must be exactly what
// runs and exactly BAR files long, so a walk that grows fails here until the doc says why.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Session } from 'node:inspector';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';
import { post, sign, SECRETS, startTestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Today's count, which docs/architecture.md records: the fifteen issue 31 asked for. */
const BAR = 15;

/** Run by the delivery, not counted (docs/architecture.md names each group under the walk). */
const NOT_COUNTED = [
  // the pipeline's internals: the router, guards, reply writer, metrics
  'src/http/router.ts', 'src/http/guards.ts', 'src/http/respond.ts', 'src/http/metrics.ts',
  // shared leaves
  'src/log.ts', 'src/safe-json.ts', 'src/engine/text.ts', 'src/db/open.ts', 'src/engine/ids.ts',
  // what only counts or traces
  'src/trigger/metrics.ts', 'src/trace.ts', 'src/trigger/job-trace.ts', 'src/db/wal-checkpointer.ts',
];

/**
 * Files of which only the named functions (and the functions written inside them) run uncounted: any other function
 * of the file that runs counts the whole file.
 */
const NOT_COUNTED_CALLS: Record<string, readonly string[]> = {
  // the connection count every socket passes before the pipeline sees its request
  'src/http/http-server.ts': ['guardConnections'],
  // the queue's hook: the WAL checkpointer's nudge, and the job loop's kick (job-loop.ts, counted)
  'src/trigger/main.ts': ['onEnqueued'],
};

interface Range { startOffset: number; endOffset: number; count: number }
interface ScriptCoverage { url: string; functions: Array<{ functionName: string; ranges: Range[] }> }

/** Whether a function of `file` ran outside the functions NOT_COUNTED_CALLS lets run. */
function ranCounted(file: string, functions: ScriptCoverage['functions']): boolean {
  const allowed = NOT_COUNTED_CALLS[file];
  const ran = functions.map((f) => f.ranges[0]!).filter((r) => r.count > 0);
  if (!allowed) return ran.length > 0;
  const within = functions.filter((f) => allowed.includes(f.functionName)).map((f) => f.ranges[0]!);
  assert.equal(new Set(functions.filter((f) => allowed.includes(f.functionName)).map((f) => f.functionName)).size,
    allowed.length, `${file} no longer has all of ${allowed.join(', ')}: update NOT_COUNTED_CALLS`);
  return ran.some((r) => !within.some((w) => w.startOffset <= r.startOffset && r.endOffset <= w.endOffset));
}

/** The src/ modules a function of which ran since the last call (taking precise coverage resets the counts). */
function takeRan(session: Session): string[] {
  let ran: string[] | undefined;
  session.post('Profiler.takePreciseCoverage', (err, res) => {
    if (err) throw err;
    ran = (res.result as ScriptCoverage[])
      .filter((s) => s.url.startsWith('file:'))
      .map((s) => ({ file: relative(ROOT, fileURLToPath(s.url)), functions: s.functions }))
      .filter((s) => s.file.startsWith('src/') && ranCounted(s.file, s.functions))
      .map((s) => s.file);
  });
  // A session on this thread answers before post returns, so the counts are those at the caller's moment.
  assert.ok(ran, 'coverage taken synchronously');
  return ran.sort();
}

/** The files docs/architecture.md's "Path (a)" numbers, in its order. */
function documentedWalk(): string[] {
  const doc = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('## Path (a)'), doc.indexOf('\n## ', doc.indexOf('## Path (a)') + 1));
  return [...section.matchAll(/\b(\d+)\. `(src\/[^`]+)`/g)].map((m) => m[2]!);
}

function issueLabelled(number: number): Buffer {
  return Buffer.from(JSON.stringify({
    action: 'labeled', label: { name: 'svc' }, repository: { full_name: 'acme/api' },
    issue: {
      number, title: `Login fails ${number}`, body: 'Steps', labels: [{ name: 'svc' }], author_association: 'OWNER',
    },
  }));
}

describe('path (a): a GitHub webhook to svc start spawned', () => {
  it(`reads through the ${BAR} files docs/architecture.md lists`, async (t) => {
    for (const file of [...NOT_COUNTED, ...Object.keys(NOT_COUNTED_CALLS)]) {
      assert.ok(existsSync(`${ROOT}${file}`), `${file} is gone: update this list`);
    }
    const documented = documentedWalk();
    assert.equal(documented.length, BAR, `docs/architecture.md's walk lists ${documented.length} files, not ${BAR}`);
    const session = new Session();
    session.connect();
    const send = (method: string, params?: object) => new Promise<void>((resolve, reject) =>
      session.post(method, params, (err) => (err ? reject(err) : resolve())));
    await send('Profiler.enable');
    await send('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    // No Control Plane: its reports (a job's summary, the served repositories, retried a second after the start) would
    // run control-report.ts in the middle of the measured delivery.
    const trigger = await startTestTrigger({ SVC_CONTROL_URL: undefined });
    t.after(async () => {
      session.disconnect();
      await trigger.cleanup();
    });
    // The channel speaks as a ChildProcess is made, before it is spawned; the stack says whose start it is.
    let atStart: string[] | null = null;
    let started = (): void => {};
    const onChild = (): void => {
      if (!/\bat startChild\b/.test(new Error().stack ?? '')) return;
      atStart = takeRan(session);
      started();
    };
    subscribe('child_process', onChild);
    t.after(() => unsubscribe('child_process', onChild));
    const deliver = async (number: number): Promise<{ ran: string[]; job: string }> => {
      atStart = null;
      const spawned = new Promise<void>((resolve) => (started = resolve));
      const raw = issueLabelled(number);
      const res = await post(`${trigger.url}/webhook`, raw, {
        'x-github-event': 'issues', 'x-github-delivery': `walk-${number}`,
        'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`,
      });
      assert.equal(res.status, 202);
      await spawned;
      return { ran: atStart!, job: res.body.job_id as string };
    };
    // The first delivery loads and warms what the second runs; the counts start once its job has ended and its
    // summary has been dealt with (the fake svc's run succeeds at once; the summary's outcome is recorded only after
    // the job's end), so nothing of its launch or its end is counted as the second delivery's.
    const first = await deliver(1);
    await waitFor(() => trigger.stores.replies.get(first.job)?.notify_status, "the first job's summary to settle");
    takeRan(session);
    const { ran } = await deliver(2);
    const walk = ran.filter((p) => !NOT_COUNTED.includes(p));
    assert.deepEqual(walk, documented.sort(), `docs/architecture.md "Path (a)" lists what runs:\n${walk.join('\n')}`);
  });
});
