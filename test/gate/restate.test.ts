// The gate restates what it forwards: the destination reads exactly the requests the gate decided, framed by the
// gate. Each attack here writes raw bytes to the gate the way a hostile agent would, and a raw TCP upstream on
// loopback keeps every byte it was sent, so the test reads the stream a destination would parse.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelRoute } from '../../src/gate/model-apis.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import {
  countRequests, rawExchange, recordingConnect, startRawUpstream, tableResolver, type RawUpstream,
} from './helpers.ts';

const SMUGGLED = 'GET /admin/delete-everything HTTP/1.1\r\nHost: internal.test\r\n\r\n';
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

describe('egress gate request framing', () => {
  const records: EgressRecord[] = [];
  let raw: RawUpstream;
  let gate: Gate;
  let target: string;

  before(async () => {
    raw = await startRawUpstream('127.0.0.2');
    const { resolve } = tableResolver({ 'local.test': ['127.0.0.2'] });
    gate = await startGate({
      policy: parseGatePolicy({ allow: ['local.test', `127.0.0.2:${raw.port}`] }), tcpPort: 0, resolve,
      connect: recordingConnect().connect, onRecord: (r) => records.push(r),
      models: [modelRoute('openai', `http://127.0.0.2:${raw.port}/v1`, 'authorization', 'Bearer real')],
    });
    target = `http://local.test:${raw.port}`;
  });

  after(async () => {
    await gate.close();
    await raw.close();
  });

  it('refuses a GET with Transfer-Encoding: chunked carrying a second request, and opens nothing', async () => {
    const before = raw.connections.length;
    const answer = await rawExchange(gate.port ?? 0,
      `GET ${target}/innocent HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.match(answer, /no body to transfer-encode/);
    assert.equal(raw.connections.length, before, 'the destination got no connection');
    const record = records.at(-1);
    assert.equal(record?.decision, 'denied');
    assert.equal(record?.status, 400);
  });

  it('refuses the same with the Transfer-Encoding after 1,000 other headers (past what headersDistinct holds)', async () => {
    const before = raw.connections.length;
    const filler = Array.from({ length: 1000 }, (_, i) => `x${i}: 1\r\n`).join('');
    const answer = await rawExchange(gate.port ?? 0,
      `GET ${target}/innocent HTTP/1.1\r\nHost: local.test\r\n${filler}Transfer-Encoding: chunked\r\n\r\n` +
      `${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.match(answer, /no body to transfer-encode/);
    assert.equal(raw.connections.length, before, 'the destination got no connection');
  });

  it('refuses the same through the model API mode', async () => {
    const before = raw.connections.length;
    const answer = await rawExchange(gate.port ?? 0,
      'GET /_model/openai/models HTTP/1.1\r\nHost: gate\r\nTransfer-Encoding: chunked\r\n\r\n' +
      `${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal(raw.connections.length, before);
  });

  for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS']) {
    it(`refuses a ${method} whose Content-Length body is a second request`, async () => {
      const before = raw.connections.length;
      const answer = await rawExchange(gate.port ?? 0,
        `${method} ${target}/x HTTP/1.1\r\nHost: local.test\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`);
      assert.match(answer, /^HTTP\/1\.1 400 /);
      assert.equal(raw.connections.length, before);
    });
  }

  it('refuses a Content-Length of over 15 digits (past what a number holds exactly), and opens nothing', async () => {
    const before = raw.connections.length;
    const answer = await rawExchange(gate.port ?? 0,
      `POST ${target}/x HTTP/1.1\r\nHost: local.test\r\nContent-Length: 9007199254740993\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 [^]*the Content-Length is not a number/);
    assert.equal(raw.connections.length, before);
  });

  it('refuses a plain-HTTP target whose host is no host name, or that is no URL at all', async () => {
    const before = raw.connections.length;
    const dots = await rawExchange(gate.port ?? 0, 'GET http://local..test/ HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(dots, /^HTTP\/1\.1 400 [^]*host "local\.\.test" is not a host name/);
    const broken = await rawExchange(gate.port ?? 0, 'GET http://local%2Ftest/ HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(broken, /^HTTP\/1\.1 400 [^]*the request target is not a URL/);
    assert.equal(raw.connections.length, before);
    assert.equal(records.at(-1)?.decision, 'denied');
  });

  it('refuses a transfer coding other than plain chunked', async () => {
    const answer = await rawExchange(gate.port ?? 0,
      `POST ${target}/x HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 /);
  });

  it('forwards a chunked POST whose body looks like a request as one request, chunked by the gate', async () => {
    const before = raw.connections.length;
    const answer = await rawExchange(gate.port ?? 0,
      `POST ${target}/upload HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n` +
      `\r\n${chunk('0\r\n\r\n')}${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 200 /);
    assert.equal(raw.connections.length, before + 1);
    const bytes = await raw.connections.at(-1)?.bytes ?? '';
    assert.match(bytes, /^POST \/upload HTTP\/1\.1\r\n/);
    assert.equal(countRequests(bytes), 1, `one request on the wire:\n${bytes}`);
    assert.equal(bytes.match(/^transfer-encoding: chunked$/gim)?.length, 1);
    assert.doesNotMatch(bytes, /^content-length:/im);
  });

  it('forwards a Content-Length POST with the length the gate wrote, and nothing after it', async () => {
    const body = `{"x":1}${SMUGGLED}`;
    const answer = await rawExchange(gate.port ?? 0,
      `POST /_model/openai/chat/completions HTTP/1.1\r\nHost: gate\r\nContent-Length: ${body.length}\r\n` +
      `Connection: close\r\n\r\n${body}`);
    assert.match(answer, /^HTTP\/1\.1 200 /);
    const bytes = await raw.connections.at(-1)?.bytes ?? '';
    assert.match(bytes, /^POST \/v1\/chat\/completions HTTP\/1\.1\r\n/);
    assert.equal(countRequests(bytes), 1);
    assert.equal(bytes.match(/^content-length: (\d+)$/im)?.[1], String(body.length));
    assert.ok(bytes.endsWith(body), 'the body ends the stream');
  });

  it('decides each request of a keep-alive connection and sends each on its own upstream connection', async () => {
    const before = raw.connections.length;
    const recordsBefore = records.length;
    const answer = await rawExchange(gate.port ?? 0,
      `GET ${target}/one HTTP/1.1\r\nHost: local.test\r\n\r\n` +
      `GET ${target}/two HTTP/1.1\r\nHost: local.test\r\nConnection: close\r\n\r\n`);
    assert.equal(answer.match(/HTTP\/1\.1 200 /g)?.length, 2);
    assert.equal(raw.connections.length, before + 2);
    const streams = await Promise.all(raw.connections.slice(before).map((c) => c.bytes));
    assert.deepEqual(streams.map(countRequests), [1, 1]);
    assert.match(streams[0] ?? '', /^GET \/one /);
    assert.match(streams[1] ?? '', /^GET \/two /);
    assert.doesNotMatch(streams[0] ?? '', /content-length|transfer-encoding/i, 'a GET goes without a body');
    assert.equal(records.length, recordsBefore + 2);
  });
});

// Node's own parser refuses Transfer-Encoding beside Content-Length, but an operator's NODE_OPTIONS may hold
// --insecure-http-parser, which lets them both through: the gate's framing refuses them itself.
describe('egress gate request framing under a lenient HTTP parser', () => {
  it('refuses a request with both Transfer-Encoding and Content-Length, and two Transfer-Encodings', async (t) => {
    const gateModule = new URL('../../src/gate/gate.ts', import.meta.url).href;
    const program = `import { startGate } from ${JSON.stringify(gateModule)};
      const gate = await startGate({ policy: { allow: [], deny: [] }, tcpPort: 0 });
      process.stdout.write(\`PORT \${gate.port}\\n\`);`;
    const child = spawn(process.execPath, ['--insecure-http-parser', '--input-type=module', '-e', program], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    t.after(() => child.kill());
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /PORT (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`the gate exited with ${code}`)));
    });
    const both = await rawExchange(port,
      'POST http://local.test/x HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\n' +
      `Content-Length: 3\r\n\r\n${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(both, /^HTTP\/1\.1 400 [^]*both Transfer-Encoding and Content-Length is refused/);
    const twice = await rawExchange(port,
      'POST http://local.test/x HTTP/1.1\r\nHost: local.test\r\nTransfer-Encoding: chunked\r\n' +
      `Transfer-Encoding: chunked\r\n\r\n${chunk(SMUGGLED)}0\r\n\r\n`);
    assert.match(twice, /^HTTP\/1\.1 400 [^]*only "Transfer-Encoding: chunked" is forwarded/);
  });
});
