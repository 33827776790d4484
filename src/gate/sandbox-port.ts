// The gate's port inside a sandbox (DESIGN §7a, docs/gate.md "Interface"): a listening socket in the sandbox's network
// namespace, handed out to svc over the IPC channel node opens on NODE_CHANNEL_FD, after which it exits. Given a port,
// it listens on 127.0.0.1:<port> itself and prints the port once handed out; given `--fd N`, it hands out the socket
// systemd's activator already listens on (sandbox-command.ts). The socket keeps the namespace it was made in, so svc's
// gate accepts the agent's connections on it directly: no Unix socket is bound in. It decides nothing, and imports
// only node:net so it starts in a few milliseconds.
import { createServer } from 'node:net';

const [first = '', second = ''] = process.argv.slice(2);
const fdMode = first === '--fd';
const text = fdMode ? second : first;
const number = Number(text);
if (!/^\d{1,5}$/.test(text) || number > 65535 || !process.send) {
  process.stderr.write('usage: NODE_CHANNEL_FD=<fd> node sandbox-port.js <port> | --fd <listening fd>\n');
  process.exit(2);
}

const server = createServer();
server.once('error', (err: NodeJS.ErrnoException) => {
  const what = fdMode ? `descriptor ${number}` : `127.0.0.1:${number}`;
  process.stderr.write(`svc gate port: cannot listen on ${what} (${err.code ?? err.message})\n`);
  process.exit(1);
});
server.listen(fdMode ? { fd: number } : { port: number, host: '127.0.0.1' }, () => {
  const address = server.address();
  process.send?.('listening', server, {}, (err: Error | null) => {
    if (err) {
      process.stderr.write(`svc gate port: cannot hand the port to svc (${err.message})\n`);
      process.exit(1);
    }
    // svc holds its own copy now; this one's close leaves it listening.
    if (!fdMode) process.stdout.write(`${typeof address === 'object' && address ? address.port : number}\n`);
    process.disconnect();
    server.close();
  });
});
