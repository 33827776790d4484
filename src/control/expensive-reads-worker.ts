// The expensive-reads thread (expensive-reads.ts): its own read-only connection, one read at a time.
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';
import type { ExpensiveRequest } from './expensive-reads.ts';
import { errorMessage } from '../errors.ts';

// Loaded after quiet-sqlite-warning.ts has filtered node:sqlite's ExperimentalWarning (hence the dynamic imports).
const { openConnection } = await import('../db/open.ts');
const { createStatsStore } = await import('../db/stats-store.ts');
const { STATS_BODIES } = await import('./expensive-reads.ts');

const port = parentPort;
if (!port) throw new TypeError('expensive-reads-worker must run as a worker thread');

const db = openConnection((workerData as { path: string }).path);
db.exec('PRAGMA query_only = ON');
const stats = createStatsStore(db);

port.on('message', (request: ExpensiveRequest) => {
  try {
    port.postMessage({ id: request.id, value: STATS_BODIES[request.kind](stats, request.filter) });
  } catch (err) {
    port.postMessage({ id: request.id, error: errorMessage(err) });
  }
});
