// The gate's port inside a sandbox (DESIGN §7a, docs/gate.md "Interface"): listens on 127.0.0.1:<port> in the
// sandbox's network namespace, hands that listening socket out to svc over the IPC channel node opens on
// NODE_CHANNEL_FD, prints its port and exits. The socket keeps the namespace it was made in, so svc's gate accepts the
// agent's connections on it directly: no Unix socket is bound in. It decides nothing, and imports only node:net so it
// starts in a few milliseconds.
import { createServer } from 'node:net';

const portText = process.argv[2] ?? '';
const port = Number(portText);
if (!/^\d{1,5}$/.test(portText) || port > 65535 || !process.send) {
  process.stderr.write('usage: NODE_CHANNEL_FD=<fd> node sandbox-port.js <port>\n');
  process.exit(2);
}

const server = createServer();
server.once('error', (err: NodeJS.ErrnoException) => {
  process.stderr.write(`svc gate port: cannot listen on 127.0.0.1:${port} (${err.code ?? err.message})\n`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.send?.('listening', server, {}, (err: Error | null) => {
    if (err) {
      process.stderr.write(`svc gate port: cannot hand the port to svc (${err.message})\n`);
      process.exit(1);
    }
    // svc holds its own copy now; this one's close leaves it listening.
    process.stdout.write(`${typeof address === 'object' && address ? address.port : port}\n`);
    process.disconnect();
    server.close();
  });
});
