// A destination's answer head is untrusted: a status node will not write (099), one that is no final answer (101,
// 600) or a reason phrase with a control byte gets the client a recorded 502 or the standard phrase, and the gate
// goes on serving. Before, writeHead threw inside the upstream's 'response' listener and the gate's process exited.
// Every packet here goes to a loopback address.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect, createServer as createTcpServer, type AddressInfo, type Server } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { gateRequest, recordingConnect } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

describe('a destination answer head the gate will not forward', () => {
  const records: EgressRecord[] = [];
  let destination: Server;
  let port: number;
  let gate: Gate;

  before(async () => {
    // Answers each request with the status line its path names (latin1), then an empty body.
    destination = createTcpServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', (d: Buffer) => {
        const path = /^\S+ (\S+)/.exec(d.toString('latin1'))?.[1] ?? '/';
        const line = decodeURIComponent(path.replace(/^\/(v1\/)?/, ''));
        socket.end(Buffer.from(`HTTP/1.1 ${line}\r\ncontent-length: 2\r\n\r\nok`, 'latin1'));
      });
    });
    await new Promise<void>((r) => destination.listen(0, '127.0.0.2', r));
    port = (destination.address() as AddressInfo).port;
    gate = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.2:${port}`] }), tcpPort: 0, connect: recordingConnect().connect,
      models: [modelRoute('openai', `http://127.0.0.2:${port}/v1`, 'authorization', 'Bearer k')],
      onRecord: (r) => records.push(r),
    });
  });

  after(async () => {
    await gate.close();
    destination.close();
  });

  /** The record of the request whose method is `method` (each case asks with its own). */
  async function recordOf(method: string): Promise<EgressRecord> {
    return waitFor(() => records.find((r) => r.method === method), `the record of ${method}`);
  }

  const refused = [
    ['099 X', 'status 99', 'PATCH'], ['101 Switching', 'status 101', 'PUT'], ['600 X', 'status 600', 'DELETE'],
  ] as const;
  for (const [line, said, method] of refused) {
    it(`answers 502 to "HTTP/1.1 ${line}" from a plain-HTTP destination, records it, and serves on`, async () => {
      const target = `http://127.0.0.2:${port}/${encodeURIComponent(line)}`;
      const answer = await gateRequest({ port: gate.port ?? 0 }, target, { method });
      assert.equal(answer.status, 502);
      assert.equal(answer.body, `svc gate: the destination answered with ${said}\n`);
      const record = await recordOf(method);
      assert.deepEqual([record.decision, record.status, record.reason],
        ['allowed', 502, `the destination answered with ${said}`]);
      const next = await gateRequest({ port: gate.port ?? 0 }, `http://127.0.0.2:${port}/204%20No%20Content`);
      assert.equal(next.status, 204);
    });
  }

  it('answers 502 to a model API that answers "HTTP/1.1 099 X"', async () => {
    const answer = await gateRequest({ port: gate.port ?? 0 }, `/_model/openai/${encodeURIComponent('099 X')}`,
      { method: 'POST', body: '{}' });
    assert.equal(answer.status, 502);
    assert.equal(answer.body, 'svc gate: the destination answered with status 99\n');
  });

  it('forwards the status and body but its own reason phrase when the destination sends one with a DEL', async () => {
    const client = netConnect(gate.port ?? 0, '127.0.0.1');
    const text = await new Promise<string>((resolve, reject) => {
      let got = '';
      client.setEncoding('latin1');
      client.on('data', (d: string) => (got += d));
      client.on('end', () => resolve(got));
      client.on('error', reject);
      client.write(`GET http://127.0.0.2:${port}/${encodeURIComponent('200 O\x7fK')} HTTP/1.1\r\n` +
        `host: 127.0.0.2:${port}\r\nconnection: close\r\n\r\n`);
    });
    assert.match(text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(text, /\r\n\r\nok$/);
  });
});
