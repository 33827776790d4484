// The egress gate for the bench, in its own process (as svc runs it, apart from the agent): a listening socket handed
// to it as a sandbox hands its port (spawn-group.ts), a policy naming the bench's two loopback upstreams exactly, and
// the model route to the HTTPS stand-in with a fake key.
// Usage: node gate-server.ts <model port> <blaster port> <cert.pem>; prints its port's http:// URL when ready.
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { PRICES } from '../../src/gate/prices.ts';

const [modelPort = '', blasterPort = '', certPath = ''] = process.argv.slice(2);
const gate = await startGate({
  policy: parseGatePolicy({ allow: [`127.0.0.1:${modelPort}`, `127.0.0.1:${blasterPort}`] }),
  models: [modelRoute('anthropic', `https://127.0.0.1:${modelPort}`, 'x-api-key', 'bench-key')],
  ca: readFileSync(certPath),
  // Metering on, as a run's gate has it: the usage reader and the budget check on every model call.
  meter: { prices: PRICES, refusal: () => null },
});
const port = createServer();
await new Promise<void>((resolve) => port.listen(0, '127.0.0.1', resolve));
const { port: number } = port.address() as AddressInfo;
gate.serve(port);
process.on('SIGTERM', () => void gate.close().then(() => process.exit(0)));
process.stdout.write(`gate ready http://127.0.0.1:${number}\n`);
