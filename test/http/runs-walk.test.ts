// Path (c)'s walk, measured as path (a)'s is (test/trigger/webhook-walk.test.ts): the src/ modules whose code a
// `GET /v1/runs` for a next page runs under V8's precise coverage, from the request to its last byte, less the
// pipeline's internals and the shared leaves. The doc's numbered list must be exactly what runs and BAR files long,
// and the walk must not double back (docs/architecture.md "Doubling back"), which walk-order.ts measures.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { seedRuns, startTestControl } from '../helpers/control-server.ts';
import {
  assertWalk, counts, PIPELINE_INTERNALS, startCoverage, takeRan, walkToCheck,
} from '../helpers/walk-coverage.ts';
import { assertDoublingsBack, probesOf, recordOrder } from '../helpers/walk-order.ts';

/** Today's count, which docs/architecture.md records; issue 31 asked for at most twelve. */
const BAR = 4;

/** Run by the request, not counted (docs/architecture.md names each group under the walk). */
const NOT_COUNTED = [
  ...PIPELINE_INTERNALS,
  // shared leaves
  'src/db/open.ts', 'src/engine/ids.ts', 'src/untrusted.ts',
];

/** The connection count every socket passes before the pipeline sees its request (as in path (a)). */
const NOT_COUNTED_CALLS = { 'src/http/http-server.ts': ['guardConnections'] };

describe('path (c): GET /v1/runs to bytes', () => {
  it(`reads through the ${BAR} files docs/architecture.md lists, with no doubling back`, async (t) => {
    const documented = walkToCheck('c', BAR, NOT_COUNTED, NOT_COUNTED_CALLS);
    const session = await startCoverage();
    let measuring = false;
    const order = recordOrder(probesOf(counts(NOT_COUNTED)), () => measuring);
    const control = await startTestControl();
    t.after(async () => {
      order.stop();
      session.disconnect();
      await control.close();
    });
    seedRuns(control.deps, 120);
    // Plain fetch: the helper's request() checks each answer against the OpenAPI document, which is src/ code too.
    const page = async (query: string): Promise<string | null> => {
      const res = await fetch(`${control.url}/v1/runs?${query}`);
      assert.equal(res.status, 200);
      const body = await res.json() as { items: unknown[]; next_cursor: string | null };
      assert.equal(body.items.length, 50);
      return body.next_cursor;
    };
    // The first pages load and warm what the measured one runs; its counts start from nothing.
    const cursor = await page('limit=50');
    assert.ok(cursor);
    await page(`limit=50&cursor=${encodeURIComponent(cursor)}`);
    takeRan(session);
    measuring = true;
    await page(`limit=50&cursor=${encodeURIComponent(cursor)}`);
    measuring = false;
    assertWalk('c', takeRan(session, NOT_COUNTED_CALLS), NOT_COUNTED, documented);
    assertDoublingsBack('c', order.calls, counts(NOT_COUNTED), []);
  });
});
