// The durable job queue: per delivery its route's share is checked, then the job row, its dedupe keys (a key another
// job holds makes it a duplicate) and its reply target written, and committed before any 2xx (DESIGN §5). Deliveries
// of one event-loop turn share the COMMIT: kept because the peer bar needs it (docs/bench.md: about twice the
// deliveries per second of a commit each); one that cannot be written still fails alone.
import { errorMessage, FailedError } from '../errors.ts';
import { transaction } from '../db/open.ts';
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { SourceName } from '../webhook-sources.ts';
import { iso } from '../iso-time.ts';
import { encodeTime } from '../engine/ids.ts';
import { randomUUID } from 'node:crypto';
import type { JobTrace } from './job-trace.ts';

/** A job's origin is its source's name (src/webhook-sources.ts), as the job database stores it. */
export type Origin = SourceName;

export interface ReplyTarget {
  channel: string;
  target: Record<string, unknown>;
}

export interface EnqueueRequest {
  origin: Origin;
  /** The served repository (owner/name) the delivery was routed to (served-repos.ts). */
  repo: string;
  brief: string;
  /** The exact argv after `svc`. */
  args: string[];
  dedupeKeys: readonly string[];
  reply?: ReplyTarget | undefined;
  /** The job's span and its delivery's (job-trace.ts). */
  trace?: JobTrace | undefined;
}

export type EnqueueResult = { kind: 'queued'; jobId: string } | { kind: 'duplicate'; jobId: string } | { kind: 'full' };

// How the bounded queue is shared between routes, so a flood on one route can never 429 another (docs/trigger.md
// "Queue shares").
export interface QueueShares {
  /** Queued jobs every configured route can always place, whatever the other routes did. */
  reserve: number;
  /** Queued jobs beyond their reserve that all routes together may hold. */
  pool: number;
}

/** The reserve is at least one job: with a tiny queue fairness wins over the exact figure. */
export function queueShares(max: number, routes: number): QueueShares {
  const n = Math.max(1, routes);
  const reserve = Math.max(1, Math.floor(max / (2 * n)));
  return { reserve, pool: Math.max(0, max - n * reserve) };
}

/** Whether one more job of `origin` fits its share, given each origin's queued count. */
export function shareAdmits(shares: QueueShares, queued: ReadonlyMap<string, number>, origin: string): boolean {
  let borrowed = 0;
  for (const n of queued.values()) borrowed += Math.max(0, n - shares.reserve);
  return (queued.get(origin) ?? 0) < shares.reserve || borrowed < shares.pool;
}

/**
 * Job ids: `j`, a run id's time (engine/ids.ts) so the jobs table's key grows at its end, then 64 random bits of a
 * UUID, which Node draws from a buffer (a randomBytes call per id was ~3 % of the intake's CPU).
 */
export function newJobId(now: number = Date.now()): string {
  const uuid = randomUUID();
  return `j${encodeTime(now)}${uuid.slice(0, 8)}${uuid.slice(28)}`;
}

export const JOB_ID = /^j[0-9a-z]{26}$/;

// Deliveries that share a dedupe key take turns: while one is between its cheap checks and its commit, a copy of
// it waits, then finds the committed job and answers "duplicate" without building a brief (51 copies of
// one errtrack delivery ran `git log` 51 times). Memory: one entry per key in flight, removed on release.
// `acquire` resolves once no other holder has any of these keys; the function it returns releases them (idempotent).
function keyLeases(): (keys: readonly string[]) => Promise<() => void> {
  const holders = new Map<string, Promise<void>>();
  return async (keys) => {
    const unique = [...new Set(keys)];
    for (;;) {
      const busy = unique.map((k) => holders.get(k)).filter((p): p is Promise<void> => p !== undefined);
      if (busy.length === 0) break;
      await Promise.all(busy);
    }
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
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

/**
 * Runs `work` once every earlier work under the same key in `chains` has settled; the key's entry goes when its last
 * work settles. One at a time per key: a repository's git, one PR's follow-up decision, one job's messages.
 */
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
export type Admission = { kind: 'duplicate'; jobId: string } | { kind: 'full' } | { kind: 'open'; release: () => void };

type Pending = { request: EnqueueRequest; resolve: (r: EnqueueResult) => void; reject: (e: unknown) => void };
type Refusal = Exclude<Admission, { kind: 'open' }>;

export type JobQueue = ReturnType<typeof createJobQueue>;

export interface JobQueueOptions {
  stores: TriggerStores;
  clock: () => number;
  /** Most jobs allowed to wait; beyond it deliveries get 429 and no job id. */
  maxQueued: number;
  /** Configured routes the queue is shared between; default 1, i.e. one share of maxQueued. */
  routes?: number;
  /** Called after a commit so the dispatcher can pick the job up (never inside the transaction). */
  onEnqueued: () => void;
}

/** A delivery whose transaction failed: answered 500, never with a job id; nothing of it was written. */
export class DeliveryNotCommittedError extends FailedError {
  constructor(message: string) {
    super(`delivery not committed: ${message}`);
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

  /**
   * `queued`: each origin's queued jobs, counted up as this transaction queues more. `inserted`: the job rows it
   * inserted, by origin, counted in the DB once before its COMMIT (one it deletes again is uncounted as it goes).
   */
  function place(
    request: EnqueueRequest, now: number, queued: Map<string, number>, inserted: Map<string, number>,
  ): EnqueueResult {
    const { origin, brief, args, repo, dedupeKeys, reply, trace } = request;
    // Only a full share looks the keys up first, so that a repeat is still answered duplicate, not 429.
    if (!shareAdmits(shares, queued, origin)) return refusal(origin, dedupeKeys, queued) ?? { kind: 'full' };
    const jobId = newJobId(now);
    stores.jobs.insertUncounted({ id: jobId, origin, brief, args, created_at: now, repo, trace });
    inserted.set(origin, (inserted.get(origin) ?? 0) + 1);
    try {
      const holder = stores.dedupe.claim(dedupeKeys, jobId, now);
      if (holder !== undefined) {
        stores.jobs.remove(jobId);
        return { kind: 'duplicate', jobId: holder };
      }
      if (reply) stores.replies.insert(jobId, reply.channel, reply.target, now);
    } catch (err) {
      // Nothing of it stays: its job row goes, and its keys with it (cascade), unless SQLite ended the transaction.
      if (stores.db.isTransaction) stores.jobs.remove(jobId);
      throw err;
    }
    queued.set(origin, (queued.get(origin) ?? 0) + 1);
    return { kind: 'queued', jobId };
  }

  // The deliveries verified in one turn of the event loop (a busy server reads many requests per turn) commit in one
  // transaction and every reply waits for that COMMIT; nothing waits on a timer when the server is idle.
  let pending: Pending[] = [];
  function flush(): void {
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
            if (!stores.db.isTransaction) throw err;
            outcomes.push(new DeliveryNotCommittedError(errorMessage(err)));
          }
        }
        stores.jobs.count(inserted);
      });
    } catch (err) {
      for (const p of batch) p.reject(new DeliveryNotCommittedError(errorMessage(err)));
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
    /**
     * Cheap checks first: waits while another delivery with any of these keys is in flight, then answers duplicate
     * or full before any brief is built. On `open`, call release() once the delivery's enqueue settled.
     */
    async admit(origin: Origin, keys: readonly string[]): Promise<Admission> {
      const release = await acquire(keys);
      try {
        const found = refusal(origin, keys, stores.jobs.queuedByOrigin());
        if (found) {
          release();
          return found;
        }
      } catch {
        // The checks are only a hint (a busy DB, say): the transaction decides.
      }
      return { kind: 'open', release };
    },
    /** The job (or the verdict duplicate/full), committed when this resolves. */
    enqueue(request: EnqueueRequest): Promise<EnqueueResult> {
      return new Promise((resolve, reject) => {
        if (pending.length === 0) setImmediate(flush);
        pending.push({ request, resolve, reject });
      });
    },
    get(id: string) {
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
    infra_retries: job.infra_retries,
  };
}
