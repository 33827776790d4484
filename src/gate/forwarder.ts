// The sandbox's end of the bridge: listens on 127.0.0.1:<port> inside the sandbox's own network
// namespace and pipes each connection, byte for byte, to the gate's Unix socket. It decides nothing — the gate
// does. Runs before the agent as `node dist/gate/forwarder.js <socket> <port>`, prints the port it listens on,
// and imports only node:net and node:fs so it starts in a few milliseconds.
import { createServer, connect, type Server } from 'node:net';
import { realpathSync } from 'node:fs';

export function startForwarder(socketPath: string, port: number, host = '127.0.0.1'): Promise<Server> {
  const server = createServer({ noDelay: true }, (client) => {
    const gate = connect(socketPath);
    client.pipe(gate);
    gate.pipe(client);
    client.on('error', () => gate.destroy());
    gate.on('error', () => client.destroy());
    client.on('close', () => gate.destroy());
    gate.on('close', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

function isMain(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === import.meta.filename;
  } catch {
    return false;
  }
}

if (isMain()) {
  const [socketPath, portText] = process.argv.slice(2);
  const port = Number(portText);
  if (!socketPath || !/^\d{1,5}$/.test(portText ?? '') || port > 65535) {
    process.stderr.write('usage: node forwarder.js <gate socket> <port>\n');
    process.exit(2);
  }
  startForwarder(socketPath, port).then(
    (server) => {
      const address = server.address();
      process.stdout.write(`${typeof address === 'object' && address ? address.port : port}\n`);
    },
    (err: NodeJS.ErrnoException) => {
      process.stderr.write(`svc gate forwarder: cannot listen on 127.0.0.1:${port} (${err.code ?? err.message})\n`);
      process.exit(1);
    },
  );
}
