// Moves WAL checkpoints off the event loop, for both servers. With synchronous=NORMAL a commit only appends to the
// WAL, but every automatic checkpoint (each ~1,000 pages) copies pages into the DB and waits for two fsyncs on the
// main thread — 10–30 ms stalls on this VM's disk during a burst of deliveries or ingest batches. Here a worker
// thread with its own connection checkpoints PASSIVE (never blocking the writer) at most every `intervalMs` after
// commits. The main connection keeps a large automatic checkpoint as a backstop: under a sustained burst the WAL
// can only restart when one checkpoint catches up with the writer, so the backstop bounds its size.
// Kept for speed because bars need it: the trigger's intake fell to about half of its plain floor without it, and
// the Control Plane's fan-in spent ~7 % of its event loop in the checkpoint's fsync (docs/bench.md has both figures).
import { Worker } from 'node:worker_threads';
import type { Db } from './open.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

const WORKER = new URL(`./wal-checkpoint-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Pages (4 KiB) the WAL may reach before the main thread checkpoints itself (~64 MB). */
export const BACKSTOP_PAGES = 16_384;
/** SQLite's default automatic checkpoint, restored if the worker cannot run. */
const DEFAULT_AUTOCHECKPOINT = 1000;

export interface WalCheckpointer {
  /** Called after a commit: schedules a checkpoint soon, coalescing bursts. */
  nudge(): void;
  close(): Promise<void>;
}

export interface WalCheckpointerOptions {
  db: Db;
  path: string;
  log: Logger;
  intervalMs?: number;
}

export function createWalCheckpointer(opts: WalCheckpointerOptions): WalCheckpointer {
  const { db, log } = opts;
  const intervalMs = opts.intervalMs ?? 100;
  if (opts.path === ':memory:') return { nudge() {}, async close() {} };
  db.exec(`PRAGMA wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  // After a burst the WAL file would otherwise keep its high-water size on disk.
  db.exec(`PRAGMA journal_size_limit = ${BACKSTOP_PAGES * 4096}`);
  let worker: Worker | undefined;
  let failed = false;
  let closed = false;
  let inFlight = false;
  let dirty = false;
  let timer: NodeJS.Timeout | undefined;

  function fallBack(reason: string): void {
    if (failed) return;
    failed = true;
    log.warn('WAL checkpoints back on the main thread', { reason });
    if (!closed) db.exec(`PRAGMA wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT}`);
    void worker?.terminate();
    worker = undefined;
  }

  function start(): Worker {
    const w = new Worker(WORKER, { workerData: { path: opts.path } });
    w.unref();
    w.on('message', (m: { error: string | null }) => {
      inFlight = false;
      if (m.error) log.warn('WAL checkpoint failed; retrying on the next commit', { error: m.error });
      if (dirty) schedule();
    });
    w.on('error', (err) => fallBack(err.message));
    w.on('exit', (code) => {
      if (!closed) fallBack(`checkpoint worker exited (${code})`);
    });
    return w;
  }

  function run(): void {
    timer = undefined;
    if (closed || failed) return;
    try {
      worker ??= start();
    } catch (err) {
      fallBack(errorMessage(err));
      return;
    }
    dirty = false;
    inFlight = true;
    worker.postMessage('checkpoint');
  }

  function schedule(): void {
    if (timer || inFlight || closed || failed) return;
    timer = setTimeout(run, intervalMs);
    timer.unref();
  }

  return {
    nudge() {
      dirty = true;
      schedule();
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
