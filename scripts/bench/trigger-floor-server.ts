// The trigger figure's floors: a plain node:http server doing only part of what a signed webhook needs,
// so the bench can say what the bytes, the verification and a durable commit cost on this machine before
// any svc code runs. FLOOR_MODE: `read` (read the body, 202), `verify` (+ HMAC check, sha256 dedupe key,
// JSON.parse), `commit` (+ job row, two dedupe keys and a reply target in one WAL transaction per
// event-loop turn, answered after COMMIT). Prints its URL on stdout like the other bench servers.
import { createServer, type ServerResponse } from 'node:http';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';

const mode = process.env.FLOOR_MODE ?? 'read';
const secret = process.env.FLOOR_SECRET ?? '';
const reply = Buffer.from(JSON.stringify({ job_id: 'j01jd0000000000000000000000', status: 'queued' }));
const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(reply.length), 'cache-control': 'no-store' };

const db = mode === 'commit' ? new DatabaseSync(process.env.FLOOR_DB ?? ':memory:') : undefined;
db?.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
db?.exec(`CREATE TABLE jobs (id TEXT PRIMARY KEY, brief TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT;
  CREATE TABLE dedupe_keys (key TEXT PRIMARY KEY, job_id TEXT NOT NULL) STRICT;
  CREATE TABLE reply_targets (job_id TEXT PRIMARY KEY, target TEXT NOT NULL) STRICT;`);
const insertJob = db?.prepare('INSERT INTO jobs (id, brief, created_at) VALUES (?, ?, ?)');
const insertKey = db?.prepare('INSERT INTO dedupe_keys (key, job_id) VALUES (?, ?)');
const insertReply = db?.prepare('INSERT INTO reply_targets (job_id, target) VALUES (?, ?)');

let pending: Array<{ res: ServerResponse; keys: string[]; brief: string }> = [];
let seq = 0;
function commit(): void {
  const batch = pending;
  pending = [];
  db!.exec('BEGIN IMMEDIATE');
  for (const p of batch) {
    const id = `j${(seq += 1)}`;
    insertJob!.run(id, p.brief, Date.now());
    for (const key of p.keys) insertKey!.run(key, id);
    insertReply!.run(id, p.brief.slice(0, 16));
  }
  db!.exec('COMMIT');
  for (const p of batch) answer(p.res, 202);
}

function answer(res: ServerResponse, status: number): void {
  res.writeHead(status, headers);
  res.end(reply);
}

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (mode === 'read') return answer(res, 202);
    const expected = createHmac('sha256', secret).update(raw).digest();
    // trackerb signs in X-Hub-Signature, the source host (GitHub) in X-Hub-Signature-256: both `sha256=<hex>`.
    const signature = req.headers['x-hub-signature-256'] ?? req.headers['x-hub-signature'] ?? '';
    const given = Buffer.from(String(signature).slice(7), 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return answer(res, 401);
    const bodyKey = createHash('sha256').update(raw).digest('hex');
    const payload = JSON.parse(raw.toString('utf8')) as { issue?: { key?: string; number?: number } };
    if (!db) return answer(res, 202);
    if (pending.length === 0) setImmediate(commit);
    const delivery = req.headers['x-vendorb-webhook-identifier'] ?? req.headers['x-github-delivery'];
    pending.push({ res, keys: [`body:${bodyKey}`, `delivery:${String(delivery)}`],
      brief: String(payload.issue?.key ?? payload.issue?.number) });
  });
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
