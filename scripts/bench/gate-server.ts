// The egress gate for the bench, in its own process (as svc runs it, apart from the agent): a Unix socket, a policy
// naming the bench's two loopback upstreams exactly, and the model route to the HTTPS stand-in with a fake key.
// Usage: node gate-server.ts <socket> <model port> <blaster port> <cert.pem>; prints a line with http:// when ready.
import { readFileSync } from 'node:fs';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import { PRICES } from '../../src/gate/prices.ts';

const [socketPath = '', modelPort = '', blasterPort = '', certPath = ''] = process.argv.slice(2);
const gate = await startGate({
  socketPath,
  policy: parseGatePolicy({ allow: [`127.0.0.1:${modelPort}`, `127.0.0.1:${blasterPort}`] }),
  models: [modelRoute('anthropic', `https://127.0.0.1:${modelPort}`, 'x-api-key', 'bench-key')],
  ca: readFileSync(certPath),
  // Metering on, as a run's gate has it: the usage reader and the budget check on every model call.
  meter: { prices: PRICES, refusal: () => null },
});
process.on('SIGTERM', () => void gate.close().then(() => process.exit(0)));
process.stdout.write('gate ready http://unix\n');
