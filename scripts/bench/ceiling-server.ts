// The ceiling: a plain node:http server answering one fixed JSON body, run as its own process exactly like
// the servers it is compared with. Prints its URL on stdout once listening.
import { createServer } from 'node:http';

const body = Buffer.from(JSON.stringify({ status: 'ok' }));
const headers = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(body.length),
  'cache-control': 'no-store',
};

const server = createServer({ keepAliveTimeout: 5_000 }, (_req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});

process.on('SIGTERM', () => server.close(() => process.exit(0)));
