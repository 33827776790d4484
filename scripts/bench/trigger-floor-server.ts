// The signed-webhook figure's floor (DESIGN §7): the plainest correct implementation of the job in a bare node:http
// server. FLOOR_MODE `commit` (the floor): read the body (1 MiB cap), HMAC check over the raw bytes, sha256 body key
// and the delivery id, JSON.parse, then ONE transaction per delivery with svc's pragmas (WAL, synchronous=NORMAL,
// foreign keys): the keys are found or claimed under a UNIQUE index, the job row and its reply target written, and
// the 202 sent after COMMIT. No batching, no caches. `read` and `verify` are the lower rungs of
// trigger-floor.ts's ladder. Prints its URL on stdout like the other bench servers.
import { createServer, type ServerResponse } from 'node:http';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';

const mode = process.env.FLOOR_MODE ?? 'read';
const secret = process.env.FLOOR_SECRET ?? '';
const MiB = 1024 * 1024;
const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

const db = mode === 'commit' ? new DatabaseSync(process.env.FLOOR_DB ?? ':memory:') : undefined;
db?.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;
  PRAGMA busy_timeout = 5000; PRAGMA temp_store = MEMORY;`);
db?.exec(`CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL, brief TEXT NOT NULL,
    args TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT;
  CREATE TABLE IF NOT EXISTS dedupe_keys (key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE, created_at INTEGER NOT NULL) STRICT;
  CREATE TABLE IF NOT EXISTS reply_targets (job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    channel TEXT NOT NULL, target TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT;`);
const findKey = db?.prepare('SELECT job_id FROM dedupe_keys WHERE key = ?');
const insertJob = db?.prepare("INSERT INTO jobs (id, status, brief, args, created_at) VALUES (?, 'queued', ?, ?, ?)");
const insertKey = db?.prepare('INSERT INTO dedupe_keys (key, job_id, created_at) VALUES (?, ?, ?)');
const insertReply = db?.prepare('INSERT INTO reply_targets (job_id, channel, target, created_at) VALUES (?, ?, ?, ?)');

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, headers);
  res.end(JSON.stringify(body));
}

/** One delivery, one transaction: a key already held is a duplicate, else the job, its keys and reply target. */
function commit(keys: string[], brief: string, target: string): { status: number; body: unknown } {
  const now = Date.now();
  db!.exec('BEGIN IMMEDIATE');
  try {
    for (const key of keys) {
      const held = findKey!.get(key) as { job_id: string } | undefined;
      if (held) {
        db!.exec('COMMIT');
        return { status: 200, body: { status: 'duplicate' } };
      }
    }
    const id = `j${randomBytes(12).toString('hex')}`;
    insertJob!.run(id, brief, JSON.stringify(['start', '--brief', brief, '--pr', '--detach']), now);
    for (const key of keys) insertKey!.run(key, id, now);
    insertReply!.run(id, 'reply', target, now);
    db!.exec('COMMIT');
    return { status: 202, body: { job_id: id, status: 'queued' } };
  } catch (err) {
    if (db!.isTransaction) db!.exec('ROLLBACK');
    throw err;
  }
}

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MiB) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MiB) return answer(res, 413, { error: 'payload_too_large' });
    const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (mode === 'read') return answer(res, 202, { status: 'queued' });
    const expected = createHmac('sha256', secret).update(raw).digest();
    // trackerb signs in X-Hub-Signature, the source host (GitHub) in X-Hub-Signature-256: both `sha256=<hex>`.
    const signature = String(req.headers['x-hub-signature-256'] ?? req.headers['x-hub-signature'] ?? '');
    const given = Buffer.from(signature.startsWith('sha256=') ? signature.slice(7) : '', 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return answer(res, 401, { error: 'invalid_signature' });
    }
    let payload: { issue?: { key?: string; number?: number; title?: string; fields?: { summary?: string } } };
    try {
      payload = JSON.parse(raw.toString('utf8')) as typeof payload;
    } catch {
      return answer(res, 400, { error: 'invalid_json' });
    }
    const bodyKey = createHash('sha256').update(raw).digest('hex');
    if (!db) return answer(res, 202, { status: 'queued' });
    const delivery = req.headers['x-vendorb-webhook-identifier'] ?? req.headers['x-github-delivery'];
    const keys = [`body:${bodyKey}`, ...(delivery ? [`delivery:${String(delivery)}`] : [])];
    const issue = payload.issue ?? {};
    const brief = `${String(issue.key ?? issue.number)}: ${String(issue.fields?.summary ?? issue.title)}`;
    const done = commit(keys, brief, JSON.stringify({ issue: issue.key ?? issue.number }));
    answer(res, done.status, done.body);
  });
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
