// egress.jsonl: the gate's records as written through the real gate, read back as JSON, and summarised for a receipt.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startGate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { readEgressRecord, summarizeEgress, type EgressRecord } from '../../src/gate/evidence.ts';
import { gateConnect, gateRequest, recordingConnect, startUpstream, tableResolver } from './helpers.ts';

describe('egress evidence', () => {
  it('writes one JSON line per connection through a real gate and summarises hosts, bytes and denials', async () => {
    const upstream = await startUpstream('127.0.0.2');
    const lines: string[] = [];
    const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'], 'metadata.test': ['169.254.169.254'] });
    const gate = await startGate({
      policy: parseGatePolicy({ allow: ['*.test', `127.0.0.2:${upstream.port}`] }), tcpPort: 0, resolve,
      connect: recordingConnect().connect, onRecord: (record) => lines.push(JSON.stringify(record)),
    });
    const at = { port: gate.port ?? 0 };
    try {
      assert.equal((await gateRequest(at, `http://local.test:${upstream.port}/a`)).status, 200);
      const put = await gateRequest(at, `http://local.test:${upstream.port}/b`, { method: 'PUT', body: 'x' });
      assert.equal(put.status, 200);
      assert.equal(('status' in (await gateConnect(at, 'metadata.test:443'))), true);
      assert.equal((await gateRequest(at, 'http://outside.example/')).status, 403);
    } finally {
      await gate.close();
      await upstream.close();
    }
    const records = lines.map((line) => readEgressRecord(JSON.parse(line)));
    assert.deepEqual(records.map((r) => [r.kind, r.host, r.method, r.decision, r.status]), [
      ['http', 'local.test', 'GET', 'allowed', 200],
      ['http', 'local.test', 'PUT', 'allowed', 200],
      ['connect', 'metadata.test', null, 'denied', 403],
      ['http', 'outside.example', 'GET', 'denied', 403],
    ]);
    const summary = summarizeEgress(records);
    assert.equal(summary.connections, 4);
    assert.equal(summary.denied, 2);
    assert.deepEqual(summary.hosts[0] && [summary.hosts[0].host, summary.hosts[0].allowed], ['local.test', 2]);
    assert.ok((summary.hosts[0]?.bytesDown ?? 0) > 0);
    assert.deepEqual(summary.denials.map((d) => [d.host, d.port, d.count]), [
      ['metadata.test', 443, 1], ['outside.example', 80, 1],
    ]);
    assert.match(summary.denials[0]?.reason ?? '', /169\.254\.169\.254/);
  });

  it('counts repeated refusals of one destination as one denial', () => {
    const denied = (host: string): EgressRecord => ({
      time: '', kind: 'connect', host, port: 443, method: null, model: null, decision: 'denied', rule: null,
      reason: 'not allowed', address: null, status: 403, bytesUp: 0, bytesDown: 0, ms: 0, sni: null,
    });
    const summary = summarizeEgress([denied('a.example'), denied('a.example'), denied('b.example')]);
    assert.deepEqual(summary.denials.map((d) => [d.host, d.count]), [['a.example', 2], ['b.example', 1]]);
  });
});
