// What committing a batch of deliveries means, shared by the intake writer thread and the in-thread fallback:
// per delivery the dedupe check, the depth check, the job row, its keys and its reply target, all deliveries of
// a batch in one transaction. If that transaction fails, the batch is replayed one delivery per transaction, so
// a delivery that cannot be written fails alone (nothing of the failed attempt was committed or answered, so the
// replay cannot duplicate a job).
import { transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { DedupeBatch } from '../db/trigger-dedupe-store.ts';
import { newJobId } from './job-id.ts';
import type { EnqueueRequest, EnqueueResult } from './queue.ts';

/** A delivery that could not be committed: answered with an error (500), never with a job id. */
export interface PlaceFailure {
  kind: 'error';
  message: string;
}

export type PlaceOutcome = EnqueueResult | PlaceFailure;

/** What one transaction knows while it places deliveries: the dedupe view and the queue depth so far. */
interface Placing {
  dedupe: DedupeBatch;
  queued: number;
}

function place(
  stores: TriggerStores, tx: Placing, request: EnqueueRequest, now: number, maxQueued: number,
): EnqueueResult {
  const existing = tx.dedupe.findAny(request.dedupeKeys);
  if (existing) return { kind: 'duplicate', jobId: existing };
  if (tx.queued >= maxQueued) return { kind: 'full' };
  const jobId = newJobId(now);
  stores.jobs.insert({ id: jobId, origin: request.origin, brief: request.brief, args: request.args, created_at: now });
  tx.dedupe.claim(request.dedupeKeys, jobId, now);
  if (request.reply) stores.replies.insert(jobId, request.reply.channel, request.reply.target, now);
  tx.queued++;
  return { kind: 'queued', jobId };
}

/** One transaction over `requests`; throws (and commits nothing) if any of them cannot be written. */
function placeAll(
  stores: TriggerStores, requests: readonly EnqueueRequest[], now: number, maxQueued: number,
): EnqueueResult[] {
  let tx: Placing | undefined;
  const outcomes = transaction(stores.db, () => {
    // The queue depth is read once per transaction (this connection holds the write lock until COMMIT).
    const placing: Placing = { dedupe: stores.dedupe.batch(), queued: stores.jobs.countByStatus('queued') };
    tx = placing;
    return requests.map((r) => place(stores, placing, r, now, maxQueued));
  });
  tx?.dedupe.committed();
  return outcomes;
}

function failure(err: unknown): PlaceFailure {
  return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
}

/** Commits a batch; every outcome is durable (or an error) when this returns. */
export function placeBatch(stores: TriggerStores, requests: readonly EnqueueRequest[], now: number, maxQueued: number): PlaceOutcome[] {
  try {
    return placeAll(stores, requests, now, maxQueued);
  } catch (err) {
    if (requests.length === 1) return [failure(err)];
  }
  return requests.map((r) => {
    try {
      return placeAll(stores, [r], now, maxQueued)[0]!;
    } catch (err) {
      return failure(err);
    }
  });
}
