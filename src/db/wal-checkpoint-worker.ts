// Worker-thread side of the WAL checkpointer: its own connection, one PASSIVE checkpoint (never the writer lock) per
// request; a busy or failed one is simply tried again on the next.
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../errors.ts';

// Dynamic: loaded after quiet-sqlite-warning.ts has filtered node:sqlite's ExperimentalWarning.
const { openConnection } = await import('./open.ts');

const port = parentPort;
if (!port) throw new TypeError('wal-checkpoint-worker must run as a worker thread');

const db = openConnection((workerData as { path: string }).path);
db.exec('PRAGMA busy_timeout = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

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
