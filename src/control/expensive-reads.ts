// GET /v1/stats and /v1/stats/cost run one at a time on a worker thread with its own read-only connection, so a
// client looping them holds up nobody else's requests; without the thread the same code runs on the main thread
// (docs/control-config.md, docs/bench.md).
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.ts';
import type { StatsFilter, StatsStore } from '../db/stats-store.ts';
import { HttpError } from '../http/http-error.ts';
import { errorMessage, FailedError } from '../errors.ts';
import { STATS_BODIES } from './stats-body.ts';

const WORKER = new URL(`./expensive-reads-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Reads waiting or running on the thread; past this, 503 with Retry-After: 1. */
export const MAX_QUEUED = 8;
/** An idle thread (~20 MB of RSS) is ended after this long; the next expensive read starts a new one (tens of ms). */
export const IDLE_MS = 30_000;

export type ExpensiveRequest = { id: number; kind: 'stats' | 'cost'; filter: StatsFilter };

type Reply = { id: number; value: unknown } | { id: number; error: string };

export type ExpensiveReads = ReturnType<typeof createExpensiveReads>;

export class ExpensiveReadsBusyError extends HttpError {
  constructor() {
    const message = 'Too many expensive reads (stats) under way; try again';
    super('unavailable', message, { 'retry-after': '1' });
  }
}

export function createExpensiveReads(opts: {
  stats: StatsStore;
  /** ':memory:' keeps every read on the main thread. */
  path: string;
  log: Logger;
  maxQueued?: number;
}) {
  const { log } = opts;
  const maxQueued = opts.maxQueued ?? MAX_QUEUED;
  let worker: Worker | undefined;
  let idleTimer: NodeJS.Timeout | undefined;
  let failed = opts.path === ':memory:';
  let closed = false;
  let nextId = 1;
  type Waiting = { request: ExpensiveRequest; resolve: (v: unknown) => void; reject: (e: Error) => void };
  const pending = new Map<number, Waiting>();

  function fallBack(reason: string): void {
    if (failed) return;
    failed = true;
    log.warn('expensive reads back on the main thread', { reason });
    // The reads that were waiting on the thread are answered here instead: a failed thread is never a failed request.
    for (const p of pending.values()) {
      try {
        p.resolve(STATS_BODIES[p.request.kind](opts.stats, p.request.filter));
      } catch (err) {
        p.reject(err instanceof Error ? err : new FailedError(`Expensive read failed: ${String(err)}`));
      }
    }
    pending.clear();
    void worker?.terminate();
    worker = undefined;
  }

  /** An idle thread's exit is expected, so it is not a failure. */
  function retire(): void {
    idleTimer = undefined;
    if (pending.size > 0 || !worker) return;
    const w = worker;
    worker = undefined;
    w.removeAllListeners('exit');
    w.removeAllListeners('error');
    void w.terminate();
  }

  function start(): Worker {
    const w = new Worker(WORKER, { workerData: { path: opts.path } });
    w.unref();
    w.on('message', (reply: Reply) => {
      const waiting = pending.get(reply.id);
      if (!waiting) return;
      pending.delete(reply.id);
      if ('error' in reply) waiting.reject(new FailedError(`Expensive read failed: ${reply.error}`));
      else waiting.resolve(reply.value);
      if (pending.size === 0 && !closed) {
        if (idleTimer) clearTimeout(idleTimer);
        idleTimer = setTimeout(retire, IDLE_MS);
        idleTimer.unref();
      }
    });
    w.on('error', (err) => fallBack(err.message));
    w.on('exit', (code) => {
      if (!closed) fallBack(`expensive-reads worker exited (${code})`);
    });
    return w;
  }

  /** On the thread, or undefined when reads run on the main thread. */
  function send(request: Omit<ExpensiveRequest, 'id'>): Promise<unknown> | undefined {
    if (failed || closed) return undefined;
    if (pending.size >= maxQueued) throw new ExpensiveReadsBusyError();
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = undefined;
    try {
      worker ??= start();
    } catch (err) {
      fallBack(errorMessage(err));
      return undefined;
    }
    const full = { ...request, id: nextId++ } as ExpensiveRequest;
    const done = new Promise<unknown>((resolve, reject) => pending.set(full.id, { request: full, resolve, reject }));
    worker.postMessage(full);
    return done;
  }

  async function read(kind: ExpensiveRequest['kind'], filter: StatsFilter): Promise<Record<string, unknown>> {
    return (send({ kind, filter }) ?? STATS_BODIES[kind](opts.stats, filter)) as Record<string, unknown>;
  }

  return {
    stats: (filter: StatsFilter) => read('stats', filter),
    cost: (filter: StatsFilter) => read('cost', filter),
    async close() {
      closed = true;
      if (idleTimer) clearTimeout(idleTimer);
      for (const p of pending.values()) p.reject(new FailedError('Expensive read failed: the server is closing'));
      pending.clear();
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
