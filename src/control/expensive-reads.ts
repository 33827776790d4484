// GET /v1/stats and /v1/stats/cost run one at a time on a worker thread (this module, at its end) with its own
// read-only connection, so a client looping them holds up nobody else's requests; without the thread the same code
// runs on the main thread (docs/control-config.md, docs/bench.md).
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { Logger } from '../log.ts';
// Type-only: this module is the thread's entry too, and node:sqlite must load after the warning filter (below).
import type { CostGroup, StatsFilter, StatsStore } from '../db/stats-store.ts';
import { HttpError } from '../http/http-error.ts';
import { errorMessage, FailedError } from '../errors.ts';
import { TERMINAL_STATUSES } from '../run-json.ts';
import { DAY_MS, iso } from '../iso-time.ts';

const WORKER_ROLE = 'svc-expensive-reads';

/** Reads waiting or running on the thread; past this, 503 with Retry-After: 1. */
const MAX_QUEUED = 8;
/** An idle thread (~20 MB of RSS) is ended after this long; the next expensive read starts a new one (tens of ms). */
export const IDLE_MS = 30_000;

type ExpensiveRequest = { id: number; kind: 'stats' | 'cost'; filter: StatsFilter };

type Reply = { id: number; value: unknown } | { id: number; error: string };

export type ExpensiveReads = ReturnType<typeof createExpensiveReads>;

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
    const w = new Worker(new URL(import.meta.url), { workerData: { role: WORKER_ROLE, path: opts.path } });
    w.unref();
    w.on('message', (reply: Reply) => {
      const waiting = pending.get(reply.id);
      if (!waiting) return;
      pending.delete(reply.id);
      if ('error' in reply) waiting.reject(new FailedError(`Expensive read failed: ${reply.error}`));
      else waiting.resolve(reply.value);
      if (pending.size === 0 && !closed) {
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

  /** On the thread, or on the main thread when there is none. */
  async function read(kind: ExpensiveRequest['kind'], filter: StatsFilter): Promise<Record<string, unknown>> {
    if (!failed && !closed) {
      if (pending.size >= maxQueued) {
        const busy = 'Too many expensive reads (stats) under way; try again';
        throw new HttpError('unavailable', busy, { 'retry-after': '1' });
      }
      if (idleTimer) clearTimeout(idleTimer);
      idleTimer = undefined;
      try {
        worker ??= start();
      } catch (err) {
        fallBack(errorMessage(err));
      }
    }
    if (!worker) return STATS_BODIES[kind](opts.stats, filter);
    const request: ExpensiveRequest = { id: nextId++, kind, filter };
    const done = new Promise((resolve, reject) => pending.set(request.id, { request, resolve, reject }));
    worker.postMessage(request);
    return done as Promise<Record<string, unknown>>;
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

// The bodies themselves, the same on the thread and on the main thread.
function window(f: StatsFilter) {
  return { since: iso(f.since ?? null), until: iso(f.until ?? null), repo: f.repo ?? null };
}

function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

export function statsBody(stats: StatsStore, f: StatsFilter): Record<string, unknown> {
  const { runs, byStatus, byVerdict } = stats.counts(f);
  const terminal = TERMINAL_STATUSES.reduce((sum, s) => sum + (byStatus[s] ?? 0), 0);
  const duration = stats.durationPercentiles(f, [0.5, 0.95]);
  return {
    ...window(f),
    runs,
    by_status: byStatus,
    by_verdict: byVerdict,
    terminal,
    // succeeded / (succeeded + failed + stopped); null when nothing has finished, rather than a fake 0 or 1.
    success_rate: terminal === 0 ? null : (byStatus.succeeded ?? 0) / terminal,
    duration_ms: { ended: duration.ended, p50: duration.values[0] ?? null, p95: duration.values[1] ?? null },
    per_day: stats.runsPerDay(f).map((d) => ({
      date: dateOf(Number(d.day)), runs: Number(d.runs), succeeded: Number(d.succeeded), failed: Number(d.failed),
    })),
  };
}

/** Sums of floats drift (0.1 + 0.2); micro-dollars are finer than any provider bills. */
function usd(value: number | null): number | null {
  return value === null ? null : Math.round(value * 1e6) / 1e6;
}

function costFigures(g: CostGroup) {
  const runs = Number(g.runs);
  const known = Number(g.runs_with_cost);
  return {
    runs,
    runs_with_cost: known,
    runs_unknown_cost: runs - known,
    cost_usd: usd(g.cost_usd),
    tokens_in: g.tokens_in === null ? null : Number(g.tokens_in),
    tokens_out: g.tokens_out === null ? null : Number(g.tokens_out),
  };
}

export function costBody(stats: StatsStore, f: StatsFilter): Record<string, unknown> {
  const { cost_usd: total, ...figures } = costFigures(stats.costTotal(f));
  return {
    ...window(f),
    total_usd: total,
    ...figures,
    by_provider: stats.costBy(f, 'provider').map((g) => ({ provider: g.key, ...costFigures(g) })),
    by_repo: stats.costBy(f, 'repo').map((g) => ({ repo: g.key, ...costFigures(g) })),
    per_day: stats.costBy(f, 'day').map((g) => ({ date: dateOf(Number(g.key)), ...costFigures(g) })),
  };
}

const STATS_BODIES = { stats: statsBody, cost: costBody };

// The thread: node:sqlite is loaded only after quiet-sqlite-warning.ts filters its ExperimentalWarning.
if (!isMainThread && (workerData as { role?: unknown } | null)?.role === WORKER_ROLE) {
  await import('../quiet-sqlite-warning.ts');
  const { openConnection } = await import('../db/open.ts');
  const { createStatsStore } = await import('../db/stats-store.ts');
  const db = openConnection((workerData as { path: string }).path);
  db.exec('PRAGMA query_only = ON');
  const stats = createStatsStore(db);
  const port = parentPort!;
  port.on('message', (request: ExpensiveRequest) => {
    try {
      port.postMessage({ id: request.id, value: STATS_BODIES[request.kind](stats, request.filter) });
    } catch (err) {
      port.postMessage({ id: request.id, error: errorMessage(err) });
    }
  });
}
