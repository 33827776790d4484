// Path (a)'s walk, measured as docs/architecture.md counts it: the src/ modules whose code a second signed GitHub
// delivery runs under V8's precise coverage, up to the moment `startChild` makes its job's `svc start` child, less the
// pipeline's internals, the shared leaves and what only counts or traces. It may grow past fifteen files only by
// failing here, and the doc's numbered list must be exactly what runs.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Session } from 'node:inspector';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';
import { get, post, sign, SECRETS, startTestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BAR = 15;

/** Run by the delivery, not counted (docs/architecture.md names each group under the walk). */
const NOT_COUNTED = [
  // the pipeline's internals: the server that hands it the request, the router, guards, reply writer, metrics
  'src/http/http-server.ts', 'src/http/router.ts', 'src/http/guards.ts', 'src/http/respond.ts', 'src/http/metrics.ts',
  // shared leaves
  'src/log.ts', 'src/safe-json.ts', 'src/engine/text.ts', 'src/db/open.ts', 'src/engine/ids.ts',
  // what only counts or traces, and the WAL checkpointer's nudge that trigger/main.ts's onEnqueued calls
  'src/trigger/metrics.ts', 'src/trace.ts', 'src/trigger/job-trace.ts', 'src/db/wal-checkpointer.ts',
  'src/trigger/main.ts',
];

interface ScriptCoverage { url: string; functions: Array<{ ranges: Array<{ count: number }> }> }

/** The src/ modules a function of which ran since the last call (taking precise coverage resets the counts). */
function takeRan(session: Session): string[] {
  let ran: string[] | undefined;
  session.post('Profiler.takePreciseCoverage', (err, res) => {
    if (err) throw err;
    ran = (res.result as ScriptCoverage[])
      .filter((s) => s.url.startsWith('file:') && s.functions.some((f) => f.ranges[0]!.count > 0))
      .map((s) => relative(ROOT, fileURLToPath(s.url)))
      .filter((p) => p.startsWith('src/'));
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
  it(`reads through at most ${BAR} files, the ones docs/architecture.md lists`, async (t) => {
    for (const file of NOT_COUNTED) assert.ok(existsSync(`${ROOT}${file}`), `${file} is gone: update this list`);
    const session = new Session();
    session.connect();
    const send = (method: string, params?: object) => new Promise<void>((resolve, reject) =>
      session.post(method, params, (err) => (err ? reject(err) : resolve())));
    await send('Profiler.enable');
    await send('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    const trigger = await startTestTrigger();
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
    // The first delivery loads and warms what the second runs; the counts start once its job has ended (the fake
    // svc's run succeeds at once), so nothing of its launch or its end is counted as the second delivery's.
    const first = await deliver(1);
    const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
    await waitFor(async () => {
      const { status } = (await get(`${trigger.url}/jobs/${first.job}`, bearer)).body;
      return status !== 'queued' && status !== 'running';
    }, 'the first job to end');
    takeRan(session);
    const { ran } = await deliver(2);
    const walk = ran.filter((p) => !NOT_COUNTED.includes(p));
    assert.ok(walk.length <= BAR, `path (a) reads ${walk.length} files, past ${BAR}:\n${walk.join('\n')}`);
    assert.deepEqual(walk, documentedWalk().sort(), 'docs/architecture.md "Path (a)" lists what the delivery runs');
  });
});
