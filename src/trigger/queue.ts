// The durable job queue: per delivery its route's share checked, then its job row (reply target included) and its
// dedupe keys (a key another job holds makes it a duplicate) written and committed before any 2xx (DESIGN §5). The
// deliveries of one event-loop turn share the COMMIT, which the peer bar needs (docs/bench.md); one that fails still
// fails alone.
import { errorMessage, FailedError, isDatabaseBusy, isDiskError } from '../errors.ts';
import { BUSY_RETRY_MS, ridesOut, transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { NewJob } from '../db/trigger-jobs-store.ts';
import type { SourceName } from '../webhook-sources.ts';
import { encodeTime } from '../engine/ids.ts';
import { randomUUID } from 'node:crypto';

/** A job's row before its id and time, with its dedupe keys and reply target. */
export type EnqueueRequest = Omit<NewJob, 'id' | 'created_at'> & {
  origin: SourceName;
  dedupeKeys: readonly string[];
};

type EnqueueResult = { kind: 'queued'; jobId: string } | { kind: 'duplicate'; jobId: string } | { kind: 'full' };

/** Each route's `reserve` and the `pool` all may borrow: no flood 429s another (docs/trigger.md "Queue shares"). */
export function queueShares(max: number, routes: number): { reserve: number; pool: number } {
  const n = Math.max(1, routes);
  const reserve = Math.max(1, Math.floor(max / (2 * n)));
  return { reserve, pool: Math.max(0, max - n * reserve) };
}

/** Whether one more job of `origin` fits its share, given each origin's queued count. */
function shareAdmits(
  shares: ReturnType<typeof queueShares>, queued: ReadonlyMap<string, number>, origin: string,
): boolean {
  let borrowed = 0;
  for (const n of queued.values()) borrowed += Math.max(0, n - shares.reserve);
  return (queued.get(origin) ?? 0) < shares.reserve || borrowed < shares.pool;
}

/** `j`, a run id's time (engine/ids.ts: the key grows at its end), 64 random bits of a (buffered) UUID. */
export function newJobId(now: number = Date.now()): string {
  const uuid = randomUUID();
  return `j${encodeTime(now)}${uuid.slice(0, 8)}${uuid.slice(28)}`;
}

export const JOB_ID = /^j[0-9a-z]{26}$/;

// Deliveries sharing a dedupe key take turns between their cheap checks and commit, so a copy finds the committed job
// without building a brief. `acquire` resolves once no one holds the keys and returns their (idempotent) release.
function keyLeases(): (keys: readonly string[]) => Promise<() => void> {
  const holders = new Map<string, Promise<void>>();
  return async (keys) => {
    const unique = [...new Set(keys)];
    for (;;) {
      const busy = unique.map((k) => holders.get(k)).filter((p): p is Promise<void> => p !== undefined);
      if (busy.length === 0) break;
      await Promise.all(busy);
    }
    const { promise: done, resolve: release } = Promise.withResolvers<void>();
    for (const k of unique) holders.set(k, done);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const k of unique) if (holders.get(k) === done) holders.delete(k);
      release();
    };
  };
}

/** Runs `work` after every earlier work under `key` in `chains` settled (one at a time per key). */
export function inTurn<T>(chains: Map<string, Promise<unknown>>, key: string, work: () => Promise<T>): Promise<T> {
  const next = (chains.get(key) ?? Promise.resolve()).then(work, work);
  const settled = next.catch(() => undefined);
  chains.set(key, settled);
  void settled.then(() => {
    if (chains.get(key) === settled) chains.delete(key);
  });
  return next;
}

/** What the cheap checks say before a delivery does any work; `open` holds its keys until `release()`. */
type Admission = { kind: 'duplicate'; jobId: string } | { kind: 'full' } | { kind: 'open'; release: () => void };

type Pending = {
  request: EnqueueRequest; resolve: (r: EnqueueResult) => void; reject: (e: unknown) => void; tries: number;
};

type Refusal = Exclude<Admission, { kind: 'open' }>;

export type JobQueue = ReturnType<typeof createJobQueue>;

interface JobQueueOptions {
  stores: TriggerStores;
  clock: () => number;
  /** Most jobs allowed to wait; beyond it deliveries get 429 and no job id. */
  maxQueued: number;
  /** Configured routes the queue is shared between (default 1). */
  routes?: number;
  /** Called after a commit (never inside the transaction), so the dispatcher picks the job up. */
  onEnqueued: () => void;
  /** How many tries a delivery's batch gets while the database is busy (default BUSY_TRIES). */
  busyTries?: number;
}

/** A delivery whose transaction failed: answered 500, never with a job id; nothing of it was written. */
export class DeliveryNotCommittedError extends FailedError {
  constructor(message: string) {
    super(`delivery not committed: ${message}`);
  }
}

/** What a delivery its commit failed is rejected with: a busy database or a disk error as itself, so the pipeline
 * answers it 503 with Retry-After as it does any request (a 500 told the sender nothing it could act on). */
function notCommitted(err: unknown): Error {
  return err instanceof Error && (isDatabaseBusy(err) || isDiskError(err)) ? err
    : new DeliveryNotCommittedError(errorMessage(err));
}

/** A delivery's rows could not be taken out of the open transaction: the whole batch must be rolled back. */
class BatchRollback extends Error {
  constructor(cause: unknown) {
    super('rows of a failed delivery could not be removed', { cause });
  }
}

export function createJobQueue(opts: JobQueueOptions) {
  const { stores } = opts;
  const shares = queueShares(opts.maxQueued, opts.routes ?? 1);
  const acquire = keyLeases();

  function refusal(origin: string, keys: readonly string[], queued: ReadonlyMap<string, number>): Refusal | undefined {
    const holder = stores.dedupe.holder(keys);
    if (holder !== undefined) return { kind: 'duplicate', jobId: holder };
    return shareAdmits(shares, queued, origin) ? undefined : { kind: 'full' };
  }

  /** Takes a failed delivery's job out of the open transaction; if that fails too, the whole batch is rolled back,
   * else its batch-mates' COMMIT would keep rows of a delivery answered as not done. */
  function removeOrRollBack(jobId: string): void {
    try {
      stores.jobs.remove(jobId);
    } catch (err) {
      throw new BatchRollback(err);
    }
  }

  /** `queued` counts up as this transaction queues; `inserted` is counted in the DB once, before its COMMIT. */
  function place(
    request: EnqueueRequest, now: number, queued: Map<string, number>, inserted: Map<string, number>,
  ): EnqueueResult {
    const { origin, dedupeKeys } = request;
    // Only a full share looks the keys up first, so that a repeat is still answered duplicate, not 429.
    if (!shareAdmits(shares, queued, origin)) return refusal(origin, dedupeKeys, queued) ?? { kind: 'full' };
    const jobId = newJobId(now);
    stores.jobs.insertUncounted({ ...request, id: jobId, created_at: now });
    inserted.set(origin, (inserted.get(origin) ?? 0) + 1);
    try {
      const holder = stores.dedupe.claim(dedupeKeys, jobId, now);
      if (holder !== undefined) {
        stores.jobs.remove(jobId);
        return { kind: 'duplicate', jobId: holder };
      }
    } catch (err) {
      // Nothing of it stays: its row goes, and any keys the claim wrote with it (cascade), unless SQLite ended the
      // transaction.
      if (stores.db.isTransaction) removeOrRollBack(jobId);
      throw err;
    }
    queued.set(origin, (queued.get(origin) ?? 0) + 1);
    return { kind: 'queued', jobId };
  }

  // The deliveries of one event-loop turn commit in one transaction; no timer, so an idle server waits for nothing.
  let pending: Pending[] = [];
  /** Set while a batch waits out a busy database: deliveries meanwhile join it, in their order. */
  let retry: NodeJS.Timeout | undefined;
  function flush(): void {
    retry = undefined;
    const batch = pending;
    pending = [];
    const now = opts.clock();
    const outcomes: (EnqueueResult | Error)[] = [];
    try {
      transaction(stores.db, () => {
        stores.dedupe.catchUp();
        const queued = stores.jobs.queuedByOrigin();
        const inserted = new Map<string, number>();
        for (const p of batch) {
          try {
            outcomes.push(place(p.request, now, queued, inserted));
          } catch (err) {
            if (err instanceof BatchRollback) throw err.cause;
            if (!stores.db.isTransaction) throw err;
            outcomes.push(notCommitted(err));
          }
        }
        stores.jobs.count(inserted);
      });
    } catch (err) {
      // The batch rides out a brief lock as a request's write does; each delivery counts its own tries.
      pending = batch.filter((p) => ridesOut(stores.db, err, ++p.tries, opts.busyTries));
      if (pending.length > 0) retry = setTimeout(flush, BUSY_RETRY_MS);
      for (const p of batch) if (!pending.includes(p)) p.reject(notCommitted(err));
      return;
    }
    batch.forEach((p, i) => {
      const outcome = outcomes[i]!;
      if (outcome instanceof Error) p.reject(outcome);
      else p.resolve(outcome);
    });
    if (outcomes.some((o) => !(o instanceof Error) && o.kind === 'queued')) opts.onEnqueued();
  }

  return {
    /** Waits out other deliveries with these keys, then duplicate or full; on `open`, release() once enqueued. */
    async admit(origin: SourceName, keys: readonly string[]): Promise<Admission> {
      const release = await acquire(keys);
      try {
        const found = refusal(origin, keys, stores.jobs.queuedByOrigin());
        if (found) {
          release();
          return found;
        }
      } catch {
        // Only a hint (a busy DB, say): the transaction decides.
      }
      return { kind: 'open', release };
    },
    /** The job (or the verdict duplicate/full), committed when this resolves. */
    enqueue(request: EnqueueRequest): Promise<EnqueueResult> {
      return new Promise((resolve, reject) => {
        if (pending.length === 0 && retry === undefined) setImmediate(flush);
        pending.push({ request, resolve, reject, tries: 0 });
      });
    },
    get(id: string) {
      return stores.jobs.get(id);
    },
    /** On shutdown, before the database closes: a delivery still waiting out the lock is refused, nothing kept. */
    close(): void {
      clearTimeout(retry);
      retry = undefined;
      for (const p of pending.splice(0)) p.reject(new DeliveryNotCommittedError('the server is closing'));
    },
    depth() {
      return { queued: stores.jobs.countByStatus('queued'), running: stores.jobs.countByStatus('running') };
    },
  };
}
