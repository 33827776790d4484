// What committing a batch of deliveries means: per delivery the dedupe check, the depth check, the job row, its keys
// and its reply target, all deliveries of a batch in one transaction. If that transaction fails, the batch is
// replayed one delivery per transaction, so a delivery that cannot be written fails alone (nothing of the failed
// attempt was committed or answered, so the replay cannot duplicate a job).
import { transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { DedupeBatch } from '../db/trigger-dedupe-store.ts';
import { newJobId } from './job-id.ts';
import type { EnqueueRequest, EnqueueResult } from './delivery.ts';
import { shareLedger, type QueueShares, type ShareLedger } from './queue-shares.ts';
import { errorMessage } from '../errors.ts';

/** A delivery that could not be committed: answered with an error (500), never with a job id. */
export interface PlaceFailure {
  kind: 'error';
  message: string;
}

export type PlaceOutcome = EnqueueResult | PlaceFailure;

/** What one transaction knows while it places deliveries: the dedupe view and each origin's share so far. */
interface Placing {
  dedupe: DedupeBatch;
  shares: ShareLedger;
}

function place(stores: TriggerStores, tx: Placing, request: EnqueueRequest, now: number): EnqueueResult {
  const existing = tx.dedupe.findAny(request.dedupeKeys);
  if (existing) return { kind: 'duplicate', jobId: existing };
  if (!tx.shares.admits(request.origin)) return { kind: 'full' };
  const jobId = newJobId(now);
  const { origin, brief, args, repo } = request;
  stores.jobs.insert({ id: jobId, origin, brief, args, created_at: now, repo });
  tx.dedupe.claim(request.dedupeKeys, jobId, now);
  if (request.reply) stores.replies.insert(jobId, request.reply.channel, request.reply.target, now);
  tx.shares.take(request.origin);
  return { kind: 'queued', jobId };
}

/** One transaction over `requests`; throws (and commits nothing) if any of them cannot be written. */
function placeAll(
  stores: TriggerStores, requests: readonly EnqueueRequest[], now: number, shares: QueueShares,
): EnqueueResult[] {
  let tx: Placing | undefined;
  const outcomes = transaction(stores.db, () => {
    // The queued counts are read once per transaction (this connection holds the write lock until COMMIT).
    const placing: Placing = {
      dedupe: stores.dedupe.batch(),
      shares: shareLedger(shares, stores.jobs.queuedByOrigin()),
    };
    tx = placing;
    return requests.map((r) => place(stores, placing, r, now));
  });
  tx?.dedupe.committed();
  return outcomes;
}

function failure(err: unknown): PlaceFailure {
  return { kind: 'error', message: errorMessage(err) };
}

/** Commits a batch; every outcome is durable (or an error) when this returns. */
export function placeBatch(
  stores: TriggerStores, requests: readonly EnqueueRequest[], now: number, shares: QueueShares,
): PlaceOutcome[] {
  try {
    return placeAll(stores, requests, now, shares);
  } catch (err) {
    if (requests.length === 1) return [failure(err)];
  }
  return requests.map((r) => {
    try {
      return placeAll(stores, [r], now, shares)[0]!;
    } catch (err) {
      return failure(err);
    }
  });
}

/** What the cheap checks found before a delivery does any work: its job if it is a repeat, or whether it fits. */
export type Precheck = { kind: 'duplicate'; jobId: string } | { kind: 'full' } | { kind: 'open' };

/**
 * The refusals a delivery can get, read without a transaction and before anything costly (a child process, a
 * file): a committed holder of any key, or a full share. Only a hint: placeBatch decides again in its transaction.
 */
export function precheck(
  stores: TriggerStores,
  origin: string,
  keys: readonly string[],
  shares: QueueShares,
): Precheck {
  const holder = stores.dedupe.peek(keys);
  if (holder !== undefined) return { kind: 'duplicate', jobId: holder };
  return shareLedger(shares, stores.jobs.queuedByOrigin()).admits(origin) ? { kind: 'open' } : { kind: 'full' };
}
