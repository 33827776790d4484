// Main-thread side of the runs list's read thread (runs-page-worker.ts). Started on the first uncached page, not at
// boot (most servers never see enough list traffic to need it, and /ready stays as fast). If the thread fails, every
// page it held and every later page is read on the main connection instead: a list request never fails for it.
import { FailedError, UnavailableError } from '../errors.ts';
import { Worker } from 'node:worker_threads';
import type { RunFilter } from '../db/run-types.ts';
import type { Logger } from '../log.ts';

const WORKER = new URL(`./runs-page-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Pages asked for in one event-loop turn travel as one message each way: a message costs more than a page's JS. */
export type ReadMessage = { type: 'pages'; asks: Array<{ id: number; filter: RunFilter }> } | { type: 'close' };
export type PageReply = { id: number; body?: Uint8Array | null; error?: string };

/** The read thread can't answer (it failed, or the server is closing): read the page on the main connection. */
export class ReadThreadGoneError extends UnavailableError {
  constructor(reason: string) {
    super(`runs list read thread unavailable: ${reason}`);
  }
}

/** The query itself failed on the thread (e.g. SQLITE_BUSY past the timeout); answered like the same failure inline. */
export class ReadThreadQueryError extends FailedError {
  constructor(message: string) {
    super(message);
  }
}

export interface RunsPageReader {
  /** The page body (runs-page-query.ts), or undefined when a run on it has no stored text yet. */
  page(filter: RunFilter): Promise<Uint8Array | undefined>;
  /** False once the thread failed or closed: callers read on the main connection. */
  alive(): boolean;
  close(): Promise<void>;
}

type Waiter = { resolve: (body: Uint8Array | undefined) => void; reject: (err: Error) => void };

export function createRunsPageReader(path: string, log: Logger): RunsPageReader {
  let worker: Worker | undefined;
  const waiting = new Map<number, Waiter>();
  let nextId = 1;
  let gone: ReadThreadGoneError | undefined;

  function fail(reason: string, loud: boolean): void {
    if (gone) return;
    gone = new ReadThreadGoneError(reason);
    if (loud) log.error('runs list read thread failed; reading pages on the main thread', { reason });
    for (const w of waiting.values()) w.reject(gone);
    waiting.clear();
  }

  function start(): Worker {
    // Small heaps: the thread holds one page at a time (a limit=500 page is ~280 KB).
    const w = new Worker(WORKER, { workerData: { path }, resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 4 } });
    // Never what keeps the process alive: main.ts closes it on shutdown.
    w.unref();
    w.on('message', (replies: PageReply[]) => {
      for (const reply of replies) {
        const waiter = waiting.get(reply.id);
        waiting.delete(reply.id);
        if (!waiter) continue;
        if (reply.error !== undefined) waiter.reject(new ReadThreadQueryError(reply.error));
        else waiter.resolve(reply.body ?? undefined);
      }
    });
    w.on('error', (err) => fail(err.message, true));
    w.on('exit', (code) => fail(`exited (${code})`, code !== 0));
    return w;
  }

  let asks: Array<{ id: number; filter: RunFilter }> = [];
  function flush(): void {
    const batch = asks;
    asks = [];
    if (gone || !worker || batch.length === 0) return;
    worker.postMessage({ type: 'pages', asks: batch } satisfies ReadMessage);
  }

  return {
    page(filter) {
      if (gone) return Promise.reject(gone);
      worker ??= start();
      const id = nextId++;
      // Requests parsed in this turn of the event loop share one message (sent after I/O callbacks, see flush).
      if (asks.length === 0) setImmediate(flush);
      asks.push({ id, filter });
      return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    },
    alive() {
      return gone === undefined;
    },
    async close() {
      const w = worker;
      if (!w || gone) {
        fail('closed', false);
        return;
      }
      const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      // Messages are handled in order: pages asked before this are answered first.
      w.postMessage({ type: 'close' } satisfies ReadMessage);
      await exited;
      fail('closed', false);
    },
  };
}
