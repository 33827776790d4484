// The sandbox's end of the bridge: listens on 127.0.0.1:<port> in the sandbox's network namespace and pipes each
// connection, byte for byte, to the gate's Unix socket; it decides nothing. Prints its port once it listens, and
// imports only node:net so it starts in a few milliseconds.
import { createServer, connect } from 'node:net';

const [socketPath, portText] = process.argv.slice(2);
const port = Number(portText);
if (!socketPath || !/^\d{1,5}$/.test(portText ?? '') || port > 65535) {
  process.stderr.write('usage: node forwarder.js <gate socket> <port>\n');
  process.exit(2);
}

const server = createServer({ noDelay: true }, (client) => {
  const gate = connect(socketPath);
  client.pipe(gate);
  gate.pipe(client);
  client.on('error', () => gate.destroy());
  gate.on('error', () => client.destroy());
  client.on('close', () => gate.destroy());
  gate.on('close', () => client.destroy());
});
server.once('error', (err: NodeJS.ErrnoException) => {
  process.stderr.write(`svc gate forwarder: cannot listen on 127.0.0.1:${port} (${err.code ?? err.message})\n`);
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : port}\n`);
});
