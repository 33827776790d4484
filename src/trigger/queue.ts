// The durable job queue: dedupe claim, job row and reply target commit in one transaction before any 2xx (DESIGN §5).
import { transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import { newJobId } from './job-id.ts';

export type Origin = 'errtrack' | 'chata' | 'trackera' | 'trackerb' | 'chatb' | 'jobs' | 'webhook';

export interface ReplyTarget {
  channel: string;
  target: Record<string, unknown>;
}

export interface EnqueueRequest {
  origin: Origin;
  brief: string;
  /** The exact argv after `svc`. */
  args: string[];
  dedupeKeys: readonly string[];
  reply?: ReplyTarget | undefined;
}

export type EnqueueResult = { kind: 'queued'; jobId: string } | { kind: 'duplicate'; jobId: string } | { kind: 'full' };

export interface JobQueue {
  /** Resolves once the job (or the verdict duplicate/full) is committed; deliveries in one tick share a commit. */
  enqueue(request: EnqueueRequest): Promise<EnqueueResult>;
  get(id: string): JobRow | undefined;
  depth(): { queued: number; running: number };
}

export interface JobQueueOptions {
  stores: TriggerStores;
  clock: () => number;
  /** Most jobs allowed to wait; beyond it deliveries get 429 and no job id. */
  maxQueued: number;
  /** Called after a commit so the dispatcher can pick the job up (never inside the transaction). */
  onEnqueued: () => void;
  /** Called after every group commit (the WAL checkpointer's cue). */
  onCommitted?: () => void;
}

/** Most deliveries one transaction takes; a larger burst is split over consecutive turns. */
export const MAX_BATCH = 256;

type Pending = { request: EnqueueRequest; resolve: (r: EnqueueResult) => void; reject: (e: unknown) => void };

export function createJobQueue(opts: JobQueueOptions): JobQueue {
  const { stores } = opts;
  let pending: Pending[] = [];

  function place(request: EnqueueRequest, now: number): EnqueueResult {
    const existing = stores.dedupe.findAny(request.dedupeKeys);
    if (existing) return { kind: 'duplicate', jobId: existing };
    if (stores.jobs.countByStatus('queued') >= opts.maxQueued) return { kind: 'full' };
    const jobId = newJobId(now);
    stores.jobs.insert({ id: jobId, origin: request.origin, brief: request.brief, args: request.args, created_at: now });
    stores.dedupe.claim(request.dedupeKeys, jobId, now);
    if (request.reply) stores.replies.insert(jobId, request.reply.channel, request.reply.target, now);
    return { kind: 'queued', jobId };
  }

  function settle(batch: readonly Pending[], results: readonly EnqueueResult[]): void {
    batch.forEach((p, i) => p.resolve(results[i]!));
    opts.onCommitted?.();
    if (results.some((r) => r.kind === 'queued')) opts.onEnqueued();
  }

  // A batch that failed as a whole is replayed one delivery per transaction, so one bad delivery (or a
  // transient error) is answered with its own error while the others still commit: nothing of the failed
  // attempt was committed or answered, so replaying it cannot duplicate a job.
  function replayOneByOne(batch: readonly Pending[], now: number): void {
    for (const p of batch) {
      try {
        const result = transaction(stores.db, () => place(p.request, now));
        settle([p], [result]);
      } catch (err) {
        p.reject(err);
      }
    }
  }

  // Group commit: the deliveries verified in one event-loop turn are written in one transaction and every
  // reply waits for that commit, so "durable before 2xx" holds at a fraction of the per-commit cost. The
  // batch is whatever arrived while the loop was busy: nothing waits on a timer when the server is idle.
  function flush(): void {
    const batch = pending.length > MAX_BATCH ? pending.slice(0, MAX_BATCH) : pending;
    pending = pending.length > MAX_BATCH ? pending.slice(MAX_BATCH) : [];
    if (pending.length > 0) setImmediate(flush);
    const now = opts.clock();
    let results: EnqueueResult[];
    try {
      results = transaction(stores.db, () => batch.map((p) => place(p.request, now)));
    } catch (err) {
      if (batch.length === 1) batch[0]!.reject(err);
      else replayOneByOne(batch, now);
      return;
    }
    settle(batch, results);
  }

  return {
    enqueue(request) {
      return new Promise((resolve, reject) => {
        if (pending.length === 0) setImmediate(flush);
        pending.push({ request, resolve, reject });
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

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The job JSON of DESIGN §5. */
export function jobJson(job: JobRow): Record<string, unknown> {
  return {
    id: job.id,
    origin: job.origin,
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
