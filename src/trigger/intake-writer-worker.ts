// Worker-thread side of the intake writer: owns its own connection to the trigger DB and commits the batches of
// deliveries the main thread verified and parsed (queue-place.ts), answering each batch only once its COMMIT
// returned. The main thread answers a delivery's 2xx only after that, so "durable before 2xx" is unchanged while
// the commit (statements, WAL append) runs off the event loop. It also runs retention batches, for the same reason.
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';

const { openDatabase } = await import('../db/open.ts');
const { triggerMigrations } = await import('../db/trigger-migrations.ts');
const { createTriggerStores } = await import('../db/trigger-stores.ts');
const { placeBatch, precheck } = await import('./queue-place.ts');
const { pruneBatch } = await import('./retention.ts');
const { BACKSTOP_PAGES } = await import('./wal-checkpointer.ts');
type WriterMessage = import('./intake-writer.ts').WriterMessage;

const port = parentPort;
if (!port) throw new Error('intake-writer-worker must run as a worker thread');

// The main thread migrated the DB before starting this thread; openDatabase only sets the pragmas here.
const db = openDatabase((workerData as { path: string }).path, triggerMigrations);
// Checkpoints belong to the checkpoint thread (wal-checkpointer.ts): SQLite's default automatic checkpoint (every
// 1,000 pages) would copy pages and fsync inside this thread's commits. Same backstop as the main connection.
db.exec(`PRAGMA wal_autocheckpoint = ${BACKSTOP_PAGES}`);
const stores = createTriggerStores(db);
stores.dedupe.warm();

port.on('message', (message: WriterMessage) => {
  if (message.type === 'batch') {
    const outcomes = placeBatch(stores, message.requests, message.now, message.shares);
    port.postMessage({ type: 'batch', id: message.id, outcomes });
  } else if (message.type === 'precheck') {
    let result;
    try {
      result = precheck(stores, message.origin, message.keys, message.shares);
    } catch {
      result = { kind: 'open' }; // only a hint: the batch's transaction decides
    }
    port.postMessage({ type: 'precheck', id: message.id, result });
  } else if (message.type === 'prune') {
    let result;
    try {
      result = { type: 'prune', id: message.id, ...pruneBatch(stores, message.retention, message.now) };
    } catch (err) {
      result = { type: 'prune', id: message.id, error: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage(result);
  } else if (message.type === 'close') {
    db.close();
    port.close();
  }
});
port.postMessage({ type: 'ready' });
