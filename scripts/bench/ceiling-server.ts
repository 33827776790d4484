// The ceiling: a plain node:http server answering one fixed JSON body, run as its own process exactly like
// the servers it is compared with. Prints its URL on stdout once listening.
import { createServer } from 'node:http';

const body = Buffer.from(JSON.stringify({ status: 'ok' }));
const headers = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(body.length),
  'cache-control': 'no-store',
};

// `/page`: a fixed body shaped and sized like a real 50-run list page (~28 KB), to separate what the payload
// costs from what producing it costs.
const run = {
  source: 'local', run: 'r01jd0000000000000000000000', repo: 'acme/api', group_id: 'r01jd0000000000000000000000',
  status: 'succeeded', verdict: 'verified', brief: 'Fix the flaky retry in the upload client (#1234)', origin: 'cli',
  provider: 'claude', branch: 'svc/r01jd0000000000000000000000', pr_url: 'https://github.com/acme/api/pull/1234',
  question: null,
  started_at: '2026-11-20T10:00:00.000Z', ended_at: '2026-11-20T10:20:00.000Z', updated_at: '2026-11-20T10:20:00.000Z',
  cost_usd: 1.23, tokens_in: 123456, tokens_out: 12345, exit_code: 0, error: null,
};
const items = Array.from({ length: 50 }, () => run);
const page = Buffer.from(JSON.stringify({ items, next_cursor: 'WzE3NjM2MzY0MDAwMDAsImxvY2FsIiwicjAxamQiXQ' }));
const pageHeaders = { ...headers, 'content-length': String(page.length) };

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  // A request with a body (the webhook figures send the very same signed bodies here): read all of it first, as
  // the server under test must, then answer.
  if (req.method === 'POST') {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      res.writeHead(bytes > 0 ? 200 : 400, headers);
      res.end(body);
    });
    return;
  }
  if (req.url === '/page') {
    res.writeHead(200, pageHeaders);
    res.end(page);
    return;
  }
  res.writeHead(200, headers);
  res.end(body);
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});

process.on('SIGTERM', () => server.close(() => process.exit(0)));
