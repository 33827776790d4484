// Run inside a network namespace of its own (bwrap --unshare-net): a stand-in on 127.0.0.1:47821, the default Control
// Plane port, answering every request as a Control Plane with a token does (401 unauthorized), beside the command its
// arguments name. Prints that command's exit and output and each request the stand-in saw (method, path, the
// Authorization header or "-") as JSON. The namespace has a loopback of its own: the user's port, and the suite's guard
// on it, are never reached.
import { createServer } from 'node:http';
import { runChild } from './run-child.ts';

const seen: string[] = [];
const standIn = createServer((req, res) => {
  seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
  req.resume();
  const refusal = { error: { code: 'unauthorized', message: 'a token is required' } };
  res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify(refusal));
});
await new Promise<void>((resolve) => standIn.listen(47821, '127.0.0.1', resolve));
const [command, ...args] = process.argv.slice(2);
const result = await runChild(command!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
standIn.closeAllConnections();
standIn.close();
process.stdout.write(JSON.stringify({ ...result, seen }));
