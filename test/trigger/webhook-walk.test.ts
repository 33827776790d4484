// Path (a)'s walk, measured as docs/architecture.md counts it: the src/ modules whose code a second signed GitHub
// delivery runs under V8's precise coverage, up to the moment `startChild` makes its job's `svc start` child, less the
// pipeline's internals, the shared leaves and what only counts or traces. The doc's numbered list must be exactly what
// runs and exactly BAR files long, so a walk that grows fails here until the doc says why; and the walk must not double
// back (docs/architecture.md "Doubling back"), which walk-order.ts measures over the same delivery.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { post, sign, SECRETS, startTestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import {
  assertWalk, counts, PIPELINE_INTERNALS, startCoverage, takeRan, walkToCheck,
} from '../helpers/walk-coverage.ts';
import { assertDoublingsBack, probesOf, recordOrder } from '../helpers/walk-order.ts';

/** Today's count, which docs/architecture.md records: the fifteen issue 31 asked for at most. */
const BAR = 15;

/**
 * Where the walk doubles back today (docs/architecture.md "Doubling back"): nowhere. The body's parse asks the leaf
 * json-value.ts, the source's reader asks the typed readers, another leaf (untrusted.ts).
 */
const DOUBLING_BACK: string[] = [];

/** Run by the delivery, not counted (docs/architecture.md names each group under the walk). */
const NOT_COUNTED = [
  ...PIPELINE_INTERNALS,
  // shared leaves
  'src/log.ts', 'src/safe-json.ts', 'src/json-value.ts', 'src/untrusted.ts', 'src/one-line.ts', 'src/engine/text.ts',
  'src/db/open.ts', 'src/engine/ids.ts',
  // what only counts or traces
  'src/trigger/metrics.ts', 'src/trace.ts', 'src/trigger/job-trace.ts', 'src/db/wal-checkpointer.ts',
];

/**
 * Files of which only the named functions (and the functions written inside them) run uncounted: any other function
 * of the file that runs counts the whole file.
 */
const NOT_COUNTED_CALLS = {
  // the connection count every socket passes before the pipeline sees its request
  'src/http/http-server.ts': ['guardConnections'],
  // the queue's hook: the WAL checkpointer's nudge, and the job loop's kick (job-loop.ts, counted)
  'src/trigger/main.ts': ['onEnqueued'],
};

function issueLabelled(number: number): Buffer {
  return Buffer.from(JSON.stringify({
    action: 'labeled', label: { name: 'svc' }, repository: { full_name: 'acme/api' }, sender: { login: 'octo' },
    issue: {
      number, title: `Login fails ${number}`, body: 'Steps', labels: [{ name: 'svc' }], author_association: 'OWNER',
      user: { login: 'octo' },
    },
  }));
}

describe('path (a): a GitHub webhook to svc start spawned', () => {
  it(`reads through the ${BAR} files docs/architecture.md lists, doubling back where it says`, async (t) => {
    const documented = walkToCheck('a', BAR, NOT_COUNTED, NOT_COUNTED_CALLS);
    const session = await startCoverage();
    let measuring = false;
    const order = recordOrder(probesOf(counts(NOT_COUNTED)), () => measuring);
    // No Control Plane: its reports (a job's summary, the served repositories, retried a second after the start) would
    // run control-report.ts in the middle of the measured delivery.
    const trigger = await startTestTrigger({ SVC_CONTROL_URL: undefined });
    t.after(async () => {
      order.stop();
      session.disconnect();
      await trigger.cleanup();
    });
    // The channel speaks as a ChildProcess is made, before it is spawned; the stack says whose start it is.
    let atStart: string[] | null = null;
    let started = (): void => {};
    const onChild = (): void => {
      if (!/\bat startChild\b/.test(new Error().stack ?? '')) return;
      atStart = takeRan(session, NOT_COUNTED_CALLS);
      measuring = false;
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
    measuring = true;
    const { ran } = await deliver(2);
    assertWalk('a', ran, NOT_COUNTED, documented);
    assertDoublingsBack('a', order.calls, counts(NOT_COUNTED), DOUBLING_BACK);
  });
});
