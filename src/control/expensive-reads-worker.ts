// The expensive-reads thread (expensive-reads.ts): its own read-only connection to the Control Plane DB, answering
// stats, cost stats and filtered runs pages one at a time. It never writes: a page that still lacks a run's stored
// Run JSON text is answered `null`, and the main thread builds that page itself (runs-page-query.ts writes the text).
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';
import type { ExpensiveRequest } from './expensive-reads.ts';

// Loaded after quiet-sqlite-warning.ts has filtered node:sqlite's ExperimentalWarning (hence the dynamic imports).
const { openConnection } = await import('../db/open.ts');
const { createStatsStore } = await import('../db/stats-store.ts');
const { createRunsReadOnlyPage } = await import('../db/runs-page-query.ts');
const { statsBody, costBody } = await import('./stats-body.ts');
const { pageFrame } = await import('./runs-page-frame.ts');

const port = parentPort;
if (!port) throw new TypeError('expensive-reads-worker must run as a worker thread');

const db = openConnection((workerData as { path: string }).path);
db.exec('PRAGMA query_only = ON');
const stats = createStatsStore(db);
const page = createRunsReadOnlyPage(db);

port.on('message', (request: ExpensiveRequest) => {
  try {
    if (request.kind === 'page') {
      const body = page(request.filter, pageFrame);
      if (!body) return port.postMessage({ id: request.id, value: null });
      // A view over part of a larger buffer is copied, so exactly the page's bytes move to the main thread.
      const whole = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : body.slice();
      return port.postMessage({ id: request.id, value: whole }, [whole.buffer as ArrayBuffer]);
    }
    const value = request.kind === 'stats' ? statsBody(stats, request.filter) : costBody(stats, request.filter);
    port.postMessage({ id: request.id, value });
  } catch (err) {
    port.postMessage({ id: request.id, error: err instanceof Error ? err.message : String(err) });
  }
});
