// A destination's answer head is untrusted: a status node will not write (099), one that is no final answer (101,
// 600) or a reason phrase with a control byte gets the client a recorded 502 or the standard phrase, and the gate
// goes on serving. Before, writeHead threw inside the upstream's 'response' listener and the gate's process exited.
// Every packet here goes to a loopback address.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createTcpServer, type AddressInfo, type Server } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { gateRequest, rawExchange, recordingConnect } from './helpers.ts';
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

  // Each case asks with its own method, so its record is told apart; the model API case reaches the same
  // destination through the gate's /_model/ route instead of as a plain-HTTP proxy request.
  const refused = [
    { line: '099 X', said: 'status 99', method: 'PATCH', model: false },
    { line: '101 Switching', said: 'status 101', method: 'PUT', model: false },
    { line: '600 X', said: 'status 600', method: 'DELETE', model: false },
    { line: '099 X', said: 'status 99', method: 'POST', model: true },
  ] as const;
  for (const { line, said, method, model } of refused) {
    const from = model ? 'a model API' : 'a plain-HTTP destination';
    it(`answers 502 to "HTTP/1.1 ${line}" from ${from}, records it, and serves on`, async () => {
      const target = model
        ? `/_model/openai/${encodeURIComponent(line)}`
        : `http://127.0.0.2:${port}/${encodeURIComponent(line)}`;
      const answer = await gateRequest({ port: gate.port ?? 0 }, target, { method, body: model ? '{}' : undefined });
      assert.equal(answer.status, 502);
      assert.equal(answer.body, `svc gate: the destination answered with ${said}\n`);
      const record = await recordOf(method);
      assert.deepEqual([record.decision, record.status, record.reason],
        ['allowed', 502, `the destination answered with ${said}`]);
      const next = await gateRequest({ port: gate.port ?? 0 }, `http://127.0.0.2:${port}/204%20No%20Content`);
      assert.equal(next.status, 204);
    });
  }

  it('forwards the status and body but its own reason phrase when the destination sends one with a DEL', async () => {
    const text = await rawExchange(gate.port ?? 0,
      `GET http://127.0.0.2:${port}/${encodeURIComponent('200 O\x7fK')} HTTP/1.1\r\n` +
      `host: 127.0.0.2:${port}\r\nconnection: close\r\n\r\n`);
    assert.match(text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(text, /\r\n\r\nok$/);
  });
});
