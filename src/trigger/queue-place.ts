// What committing a batch of deliveries means, shared by the intake writer thread and the in-thread fallback:
// per delivery the dedupe check, the depth check, the job row, its keys and its reply target, all deliveries of
// a batch in one transaction. If that transaction fails, the batch is replayed one delivery per transaction, so
// a delivery that cannot be written fails alone (nothing of the failed attempt was committed or answered, so the
// replay cannot duplicate a job).
import { transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import { newJobId } from './job-id.ts';
import type { EnqueueRequest, EnqueueResult } from './queue.ts';

/** A delivery that could not be committed: answered with an error (500), never with a job id. */
export interface PlaceFailure {
  kind: 'error';
  message: string;
}

export type PlaceOutcome = EnqueueResult | PlaceFailure;

function place(stores: TriggerStores, request: EnqueueRequest, now: number, maxQueued: number): EnqueueResult {
  const existing = stores.dedupe.findAny(request.dedupeKeys);
  if (existing) return { kind: 'duplicate', jobId: existing };
  if (stores.jobs.countByStatus('queued') >= maxQueued) return { kind: 'full' };
  const jobId = newJobId(now);
  stores.jobs.insert({ id: jobId, origin: request.origin, brief: request.brief, args: request.args, created_at: now });
  stores.dedupe.claim(request.dedupeKeys, jobId, now);
  if (request.reply) stores.replies.insert(jobId, request.reply.channel, request.reply.target, now);
  return { kind: 'queued', jobId };
}

function failure(err: unknown): PlaceFailure {
  return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
}

/** Commits a batch; every outcome is durable (or an error) when this returns. */
export function placeBatch(stores: TriggerStores, requests: readonly EnqueueRequest[], now: number, maxQueued: number): PlaceOutcome[] {
  try {
    return transaction(stores.db, () => requests.map((r) => place(stores, r, now, maxQueued)));
  } catch (err) {
    if (requests.length === 1) return [failure(err)];
  }
  return requests.map((r) => {
    try {
      return transaction(stores.db, () => place(stores, r, now, maxQueued));
    } catch (err) {
      return failure(err);
    }
  });
}
