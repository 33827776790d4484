// The durable job queue: dedupe claim, job row and reply target commit in one transaction before any 2xx (DESIGN §5).
import { FailedError } from '../errors.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { Logger } from '../log.ts';
import { placeBatch, precheck, type PlaceOutcome } from './queue-place.ts';
import { queueShares, type QueueShares } from './queue-shares.ts';
import { createKeyLeases } from './key-leases.ts';
import type { EnqueueRequest, EnqueueResult, Origin } from './delivery.ts';
import { iso } from '../iso-time.ts';

/** What the cheap checks say before a delivery does any work; `open` holds its keys until `release()`. */
export type Admission = { kind: 'duplicate'; jobId: string } | { kind: 'full' } | { kind: 'open'; release: () => void };

export interface JobQueue {
  /**
   * Cheap checks first: waits while another delivery with any of these keys is in flight, then answers
   * duplicate (a committed job holds a key) or full (the origin's share is used up) before any brief is built.
   * On `open`, call release() once the delivery's enqueue settled (or it gave up).
   */
  admit(origin: Origin, keys: readonly string[]): Promise<Admission>;
  /** Resolves once the job (or the verdict duplicate/full) is committed; deliveries in one batch share a commit. */
  enqueue(request: EnqueueRequest): Promise<EnqueueResult>;
  get(id: string): JobRow | undefined;
  depth(): { queued: number; running: number };
}

export interface JobQueueOptions {
  stores: TriggerStores;
  clock: () => number;
  /** Most jobs allowed to wait; beyond it deliveries get 429 and no job id. */
  maxQueued: number;
  /** Configured routes the queue is shared between (queue-shares.ts); default 1, i.e. one share of maxQueued. */
  routes?: number;
  /** Called after a commit so the dispatcher can pick the job up (never inside the transaction). */
  onEnqueued: () => void;
  /** Called after every group commit (the WAL checkpointer's cue). */
  onCommitted?: () => void;
  log?: Logger;
}

/** Most deliveries one transaction takes; a larger burst is split over consecutive batches. */
export const MAX_BATCH = 256;

/** A delivery whose transaction failed: answered 500, never with a job id. */
export class DeliveryNotCommittedError extends FailedError {
  constructor(message: string) {
    super(`delivery not committed: ${message}`);
  }
}

type Pending = { request: EnqueueRequest; resolve: (r: EnqueueResult) => void; reject: (e: unknown) => void };

export function createJobQueue(opts: JobQueueOptions): JobQueue {
  const { stores } = opts;
  const shares: QueueShares = queueShares(opts.maxQueued, opts.routes ?? 1);
  const leases = createKeyLeases();
  let pending: Pending[] = [];
  let scheduled = false;

  function settle(batch: readonly Pending[], outcomes: readonly PlaceOutcome[]): void {
    let queued = false;
    batch.forEach((p, i) => {
      const outcome = outcomes[i] ?? { kind: 'error', message: 'no outcome' };
      if (outcome.kind === 'error') p.reject(new DeliveryNotCommittedError(outcome.message));
      else {
        queued ||= outcome.kind === 'queued';
        p.resolve(outcome);
      }
    });
    opts.onCommitted?.();
    if (queued) opts.onEnqueued();
  }

  function schedule(): void {
    if (scheduled || pending.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  }

  // Group commit: the deliveries verified in one turn of the event loop (a busy server reads many requests per turn)
  // are written in one transaction and every reply waits for that commit, so "durable before 2xx" holds at a
  // fraction of the per-commit cost. Nothing waits on a timer when the server is idle.
  function flush(): void {
    scheduled = false;
    const batch = pending.length > MAX_BATCH ? pending.slice(0, MAX_BATCH) : pending;
    pending = pending.length > MAX_BATCH ? pending.slice(MAX_BATCH) : [];
    if (batch.length === 0) return;
    const requests = batch.map((p) => p.request);
    settle(batch, placeBatch(stores, requests, opts.clock(), shares));
    schedule();
  }

  return {
    async admit(origin, keys) {
      const release = await leases.acquire(keys);
      try {
        const found = precheck(stores, origin, keys, shares);
        if (found.kind !== 'open') {
          release();
          return found;
        }
      } catch {
        // The checks are only a hint (a busy DB, say): the transaction decides.
      }
      return { kind: 'open', release };
    },
    enqueue(request) {
      return new Promise((resolve, reject) => {
        pending.push({ request, resolve, reject });
        schedule();
      });
    },
    get(id) {
      return stores.jobs.get(id);
    },
    depth() {
      return { queued: stores.jobs.countByStatus('queued'), running: stores.jobs.countByStatus('running') };
    },
  };
}

/** The job JSON of DESIGN §5. */
export function jobJson(job: JobRow): Record<string, unknown> {
  return {
    id: job.id,
    origin: job.origin,
    repo: job.repo,
    status: job.status,
    brief: job.brief,
    args: job.args,
    created_at: iso(job.created_at),
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
    run: job.run_source !== null && job.run_id !== null ? { source: job.run_source, run: job.run_id } : null,
    exit_code: job.exit_code,
    summary: job.summary,
    error: job.error,
  };
}
