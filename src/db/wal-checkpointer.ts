// Moves WAL checkpoints (10–30 ms stalls) off both servers' event loop: a worker thread (this module, at its end) with
// its own connection checkpoints PASSIVE at most every `intervalMs` after commits; the main connection's large
// automatic checkpoint is a backstop under a sustained burst. Kept for speed (docs/bench.md).
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { Db } from './open.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

const WORKER_ROLE = 'svc-wal-checkpoint';

/** Pages (4 KiB) the WAL may reach before the main thread checkpoints itself (~64 MB). */
export const BACKSTOP_PAGES = 16_384;
/** SQLite's default, restored if the worker cannot run. */
const DEFAULT_AUTOCHECKPOINT = 1000;

export type WalCheckpointer = ReturnType<typeof createWalCheckpointer>;

export function createWalCheckpointer(opts: { db: Db; path: string; log: Logger; intervalMs?: number }) {
  const { db, log } = opts;
  if (opts.path === ':memory:') return { nudge(): void {}, async close(): Promise<void> {} };
  db.exec(`PRAGMA wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  // After a burst the WAL file would otherwise keep its high-water size on disk.
  db.exec(`PRAGMA journal_size_limit = ${BACKSTOP_PAGES * 4096}`);
  let worker: Worker | undefined;
  let timer: NodeJS.Timeout | undefined;
  /** Closed, or fallen back to the main connection. */
  let stopped = false;
  /** A checkpoint is scheduled or under way. */
  let busy = false;
  let dirty = false;

  function fallBack(reason: string): void {
    if (stopped) return;
    stopped = true;
    log.warn('WAL checkpoints back on the main thread', { reason });
    db.exec(`PRAGMA wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT}`);
    void worker?.terminate();
  }

  function start(): Worker {
    const w = new Worker(new URL(import.meta.url), { workerData: { role: WORKER_ROLE, path: opts.path } });
    w.unref();
    w.on('message', (m: { error: string | null }) => {
      busy = false;
      if (m.error) log.warn('WAL checkpoint failed; retrying on the next commit', { error: m.error });
      if (dirty) schedule();
    });
    w.on('error', (err) => fallBack(err.message));
    w.on('exit', (code) => fallBack(`checkpoint worker exited (${code})`));
    return w;
  }

  function run(): void {
    if (stopped) return;
    try {
      worker ??= start();
    } catch (err) {
      fallBack(errorMessage(err));
      return;
    }
    dirty = false;
    worker.postMessage('checkpoint');
  }

  function schedule(): void {
    if (busy || stopped) return;
    busy = true;
    timer = setTimeout(run, opts.intervalMs ?? 100).unref();
  }

  return {
    /** After a commit: a checkpoint soon, coalescing bursts. */
    nudge(): void {
      dirty = true;
      schedule();
    },
    async close(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await worker?.terminate();
    },
  };
}

// The thread: one PASSIVE checkpoint (never the writer lock) per request; a busy or failed one is tried again on the
// next. node:sqlite is loaded only after quiet-sqlite-warning.ts filters its ExperimentalWarning.
if (!isMainThread && (workerData as { role?: unknown } | null)?.role === WORKER_ROLE) {
  await import('../quiet-sqlite-warning.ts');
  const { openConnection } = await import('./open.ts');
  const db = openConnection((workerData as { path: string }).path);
  db.exec('PRAGMA busy_timeout = 0');
  const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const port = parentPort!;
  port.on('message', (message: unknown) => {
    if (message !== 'checkpoint') return;
    let error: string | null = null;
    try {
      checkpoint.get();
    } catch (err) {
      error = errorMessage(err);
    }
    port.postMessage({ done: true, error });
  });
}
