// A shared gate in a process of its own for reset-flood.test.ts: loopback only, every client must present a
// credential (none will), and the gate connects nowhere. Prints its port, then serves until killed.
import { startGate } from '../../src/gate/gate.ts';

const gate = await startGate({
  policy: { allow: [], deny: [] }, tcpPort: 0, tcpHost: '127.0.0.1', models: [],
  clients: { secret: Buffer.alloc(32, 7), maxPerClient: 32, policyFor: () => ({ allow: [], deny: [] }) },
  limits: { maxConnectionsPerPeer: 1000, maxConnections: 2000 },
  connect: () => {
    throw new Error('this gate connects nowhere');
  },
});
process.stdout.write(`PORT ${gate.port}\n`);
