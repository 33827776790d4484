// The runs list's read thread: its own connection to the Control Plane DB reads the bodies of uncached pages
// (runs-page-query.ts), so the B-tree walks and the ~28 KB copy of a page run beside the event loop, not on it.
// It only reads (query_only): every write stays on the main connection. Each body goes back as a transferred
// ArrayBuffer (no copy). WAL gives this connection a snapshot that includes every COMMIT the main thread made
// before it asked, so a page read here never misses a write the server already answered.
import '../quiet-sqlite-warning.ts';
import { parentPort, workerData } from 'node:worker_threads';

const { DatabaseSync } = await import('node:sqlite');
const { createRunsPageQuery } = await import('../db/runs-page-query.ts');
const { pageFrame } = await import('./runs-page-frame.ts');
type ReadMessage = import('./runs-page-reader.ts').ReadMessage;
type PageReply = import('./runs-page-reader.ts').PageReply;

const port = parentPort;
if (!port) throw new Error('runs-page-worker must run as a worker thread');

// The main thread opened and migrated the DB before the first page was asked for; this connection never writes.
const db = new DatabaseSync((workerData as { path: string }).path);
db.exec('PRAGMA busy_timeout = 5000');
db.exec('PRAGMA query_only = ON');
const readPage = createRunsPageQuery(db);

port.on('message', (message: ReadMessage) => {
  if (message.type === 'close') {
    db.close();
    port.close();
    return;
  }
  const replies: PageReply[] = [];
  const transfer: ArrayBuffer[] = [];
  for (const ask of message.asks) {
    try {
      const body = readPage(ask.filter, pageFrame);
      replies.push({ id: ask.id, body: body ?? null });
      // node:sqlite gives each blob its own ArrayBuffer: handing it over moves it. Anything else is copied.
      if (body && body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) transfer.push(body.buffer as ArrayBuffer);
    } catch (err) {
      replies.push({ id: ask.id, error: err instanceof Error ? err.message : String(err) });
    }
  }
  port.postMessage(replies, transfer);
});
