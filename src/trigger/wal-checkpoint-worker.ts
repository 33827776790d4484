// Worker-thread side of the WAL checkpointer: its own connection to the trigger DB, one PASSIVE checkpoint
// per request from the main thread. PASSIVE never takes the writer lock, so the main thread keeps committing
// while this thread copies pages and waits for fsync.
import { parentPort, workerData } from 'node:worker_threads';

// Same as src/cli.ts: node:sqlite's ExperimentalWarning would be a non-JSON line in the server's stderr
// log. Filter it before the module loads (hence the dynamic import).
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  if (String(warning instanceof Error ? warning.message : warning).includes('SQLite')) return;
  (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;
const { DatabaseSync } = await import('node:sqlite');

const port = parentPort;
if (!port) throw new Error('wal-checkpoint-worker must run as a worker thread');

const db = new DatabaseSync((workerData as { path: string }).path);
db.exec('PRAGMA synchronous = NORMAL');
db.exec('PRAGMA busy_timeout = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

port.on('message', (message: unknown) => {
  if (message !== 'checkpoint') return;
  let error: string | null = null;
  try {
    checkpoint.get();
  } catch (err) {
    // SQLITE_BUSY (another checkpointer) or a transient I/O error: the next request tries again.
    error = err instanceof Error ? err.message : String(err);
  }
  port.postMessage({ done: true, error });
});
