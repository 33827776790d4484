// The floor for the runs list (DESIGN §7): a bare node:http server that answers `GET /v1/runs?limit=&until=` with the
// very page SQL the Control Plane runs (src/db/runs-page-query.ts, one statement, the stored Run JSON texts joined
// inside SQLite) over a copy of the same database, and writes the bytes. No router, guards, cache or envelope: what is
// left is the work a page needs, so the Control Plane's ratio to it shows what everything else costs.
// `node runs-floor-server.ts <db>`; prints its URL on stdout once listening.
import { createServer } from 'node:http';
import { DatabaseSync } from 'node:sqlite';
import { createRunsPageQuery } from '../../src/db/runs-page-query.ts';

const dbPath = process.argv[2];
if (!dbPath) {
  process.stderr.write('usage: node runs-floor-server.ts <runs.db>\n');
  process.exit(2);
}
const db = new DatabaseSync(dbPath, { readOnly: true });
const readPage = createRunsPageQuery(db);
const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

function cursorOf(key: { started_at: number; source: string; run: string } | null): string {
  return key ? JSON.stringify(Buffer.from(JSON.stringify([key.started_at, key.source, key.run])).toString('base64url'))
    : 'null';
}

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const url = new URL(req.url ?? '/', 'http://floor');
  const limit = Number(url.searchParams.get('limit') ?? 50);
  const until = url.searchParams.get('until');
  const body = readPage({ limit, ...(until ? { until: Number(until) } : {}) },
    (next) => ({ open: '{"items":[', close: `],"next_cursor":${cursorOf(next)}}` }));
  if (!body) {
    res.writeHead(500, headers).end('{"error":"a run on this page has no stored text"}');
    return;
  }
  res.writeHead(200, { ...headers, 'content-length': String(body.byteLength) });
  res.end(body);
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
