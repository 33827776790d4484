// The floor for the runs list (DESIGN §7): the plainest correct implementation of `GET /v1/runs?limit=&until=` in a
// bare node:http + node:sqlite server — the page SELECT of plain columns (one row past the page for the cursor), each
// row's times as ISO text, and JSON.stringify of the page. No router, guards, cache or envelope, and nothing of svc's
// own code: the Control Plane's ratio to it shows what its router, guards and audit cost.
// `node runs-floor-server.ts <db>`; prints its URL on stdout once listening.
import { createServer } from 'node:http';
import { DatabaseSync } from 'node:sqlite';

const dbPath = process.argv[2];
if (!dbPath) {
  process.stderr.write('usage: node runs-floor-server.ts <runs.db>\n');
  process.exit(2);
}
const db = new DatabaseSync(dbPath, { readOnly: true });
const COLUMNS = 'source, run, repo, group_id, status, verdict, brief, origin, provider, branch, pr_url, question, ' +
  'started_at, ended_at, updated_at, cost_usd, tokens_in, tokens_out, exit_code, error';
const ORDER = 'ORDER BY started_at DESC, source DESC, run DESC LIMIT ?';
const all = db.prepare(`SELECT ${COLUMNS} FROM runs ${ORDER}`);
const until = db.prepare(`SELECT ${COLUMNS} FROM runs WHERE started_at < ? ${ORDER}`);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

type Row = Record<string, unknown> & { started_at: number; ended_at: number | null; updated_at: number };

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const url = new URL(req.url ?? '/', 'http://floor');
  const limit = Number(url.searchParams.get('limit') ?? 50);
  const before = url.searchParams.get('until');
  const rows = (before === null ? all.all(limit + 1) : until.all(Number(before), limit + 1)) as Row[];
  const items = rows.slice(0, limit).map((r) =>
    ({ ...r, started_at: iso(r.started_at), ended_at: iso(r.ended_at), updated_at: iso(r.updated_at) }));
  const last = rows.length > limit ? rows[limit - 1]! : null;
  const next = last
    ? Buffer.from(JSON.stringify([last.started_at, last.source, last.run])).toString('base64url') : null;
  const body = JSON.stringify({ items, next_cursor: next });
  res.writeHead(200, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
