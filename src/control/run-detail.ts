// What GET /v1/runs/{source}/{run} adds to the Run JSON for someone looking at one run: the answer that is waiting
// to reach a blocked run, and the attempts of its retry group (docs/control-data.md). The list stays plain Run JSON.
import type { ControlStores } from '../db/control-stores.ts';
import type { RunRow } from '../db/run-types.ts';
import { obj, str } from '../untrusted.ts';
import { iso } from '../iso-time.ts';

/** Attempts listed per group at most (a retry chain is short; this bounds a hostile one). */
const MAX_ATTEMPTS = 100;

type Stores = Pick<ControlStores, 'events' | 'controlRequests' | 'runs'>;

/** An answer given while the run is still blocked, so it has not reached the run yet; else null. */
export function pendingAnswer(stores: Stores, row: RunRow) {
  if (row.status !== 'blocked') return null;
  const answer = stores.events.latest(row.source, row.run, 'answer');
  if (!answer) return null;
  // A question asked after the answer is a new one: the old answer is no longer waiting for it.
  const question = stores.events.latest(row.source, row.run, 'question');
  if (question && question.id > answer.id) return null;
  let text = '';
  try {
    text = str(obj(JSON.parse(answer.data)).answer) ?? '';
  } catch {
    // Stored event data is JSON; an unreadable one still means an answer was given.
  }
  // Handed to the run's own runner in its next ingest response, or written where this machine's run reads it.
  const request = stores.controlRequests.latest(row.source, row.run, 'answer');
  const viaIngest = request !== undefined && request.created_at >= answer.ts;
  return {
    answer: text,
    answered_at: iso(answer.ts)!,
    via: viaIngest ? 'ingest' : 'answer_folder',
    delivered_at: viaIngest ? iso(request.delivered_at) : iso(answer.ts),
  };
}

/** Every run of the row's group, oldest first (attempt 1 first). */
export function attempts(stores: Stores, row: RunRow) {
  return stores.runs
    .list({ group_id: row.group_id, limit: MAX_ATTEMPTS })
    .reverse()
    .map((r) => ({
      source: r.source, run: r.run, status: r.status, verdict: r.verdict, started_at: iso(r.started_at)!,
    }));
}
