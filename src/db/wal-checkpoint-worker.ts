// Worker-thread side of the WAL checkpointer: its own connection, one PASSIVE checkpoint (it never takes the writer
// lock) per request from the main thread.
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../errors.ts';

// Loaded after quiet-sqlite-warning.ts has filtered node:sqlite's ExperimentalWarning (hence the dynamic import).
const { openConnection } = await import('./open.ts');

const port = parentPort;
if (!port) throw new TypeError('wal-checkpoint-worker must run as a worker thread');

const db = openConnection((workerData as { path: string }).path);
// Never waits: a busy checkpoint is simply tried again on the next request.
db.exec('PRAGMA busy_timeout = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

port.on('message', (message: unknown) => {
  if (message !== 'checkpoint') return;
  let error: string | null = null;
  try {
    checkpoint.get();
  } catch (err) {
    // SQLITE_BUSY (another checkpointer) or a transient I/O error: the next request tries again.
    error = errorMessage(err);
  }
  port.postMessage({ done: true, error });
});
