// Two attacks on the gate's reading of a tunnel's TLS ClientHello:
// - Encrypted ClientHello (ECH, or the ESNI draft): the clear server_name is the allowed CONNECT host, a cover name,
//   while the server answers as the name hidden in the encrypted extension. The gate refuses such a hello and not a
//   byte reaches the destination.
// - A hello sent in crumbs (65 KB a byte at a time) used to make the gate rebuild and re-read the whole buffer per
//   byte; now it reads it only as records complete, and refuses a hello in too many pieces.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { readClientHello } from '../../src/gate/client-hello.ts';
import { HelloWatch, MAX_HELLO_PIECES } from '../../src/gate/hello-retry.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import {
  captureHello, gateConnect, recordingConnect, startRawUpstream, tableResolver, type RawUpstream,
} from './helpers.ts';

/** `hello` (one TLS record) with one more extension of `type` at the end of its extension list. */
function withExtension(hello: Buffer, type: number, data: Buffer): Buffer {
  const body = hello.subarray(9); // record header (5), handshake header (4)
  let at = 2 + 32;
  at += 1 + (body[at] as number); // session id
  at += 2 + body.readUInt16BE(at); // cipher suites
  at += 1 + (body[at] as number); // compression methods
  const extensions = body.subarray(at + 2, at + 2 + body.readUInt16BE(at));
  const extra = Buffer.alloc(4 + data.length);
  extra.writeUInt16BE(type, 0);
  extra.writeUInt16BE(data.length, 2);
  data.copy(extra, 4);
  const list = Buffer.concat([extensions, extra]);
  const listLength = Buffer.alloc(2);
  listLength.writeUInt16BE(list.length);
  const message = Buffer.concat([body.subarray(0, at), listLength, list]);
  const handshake = Buffer.concat([Buffer.from([1, 0, message.length >> 8, message.length & 255]), message]);
  return Buffer.concat([Buffer.from([22, 3, 1, handshake.length >> 8, handshake.length & 255]), handshake]);
}

describe('a tunnel whose ClientHello hides its server name', () => {
  const records: EgressRecord[] = [];
  let upstream: RawUpstream;
  let gate: Gate;

  before(async () => {
    upstream = await startRawUpstream('127.0.0.2');
    gate = await startGate({
      // The loopback stand-in's address is allowed as such (the gate refuses loopback otherwise).
      policy: parseGatePolicy({ allow: ['cover.test', `127.0.0.2:${upstream.port}`] }), tcpPort: 0,
      resolve: tableResolver({ 'cover.test': ['127.0.0.2'] }).resolve, connect: recordingConnect().connect,
      onRecord: (r) => records.push(r),
    });
  });

  after(async () => {
    await gate.close();
    await upstream.close();
  });

  for (const [name, type] of [['ECH', 0xfe0d], ['draft ESNI', 0xffce]] as const) {
    it(`is refused when it carries ${name}, and the destination gets no byte`, async () => {
      const hello = withExtension(await captureHello('cover.test'), type, Buffer.alloc(200, 0xab));
      assert.equal(readClientHello(hello).kind, 'malformed');
      const opened = await gateConnect({ port: gate.port ?? 0 }, `cover.test:${upstream.port}`);
      assert.ok('socket' in opened, 'the CONNECT itself is allowed');
      const count = records.length;
      const answer = await new Promise<Buffer>((resolve) => {
        let got = Buffer.alloc(0);
        opened.socket.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
        opened.socket.on('close', () => resolve(got));
        opened.socket.on('error', () => {});
        opened.socket.write(hello);
      });
      assert.equal(answer[0], 21, 'the client gets a TLS alert');
      for (let i = 0; i < 500 && records.length <= count; i++) await new Promise((r) => setImmediate(r));
      const record = records.at(-1);
      assert.equal(record?.decision, 'denied');
      assert.match(record?.reason ?? '', /encrypted ClientHello/);
      assert.equal(record?.bytesUp, 0);
      const last = upstream.connections.at(-1);
      assert.ok(last, 'the gate opened its connection before answering 200');
      assert.equal(await last.bytes, '', 'not a byte reached the destination');
    });
  }
});

describe('a ClientHello sent in crumbs', () => {
  it('65 KB a byte at a time: refused after MAX_HELLO_PIECES pieces, read a handful of times', () => {
    // Four handshake records announcing a 65 KB hello, as the attack sends them.
    const record = (length: number, first: boolean) => Buffer.concat([
      Buffer.from([22, 3, 1, length >> 8, length & 255]),
      first ? Buffer.from([1, 0, 0xfe, 0xf0]) : Buffer.alloc(0), Buffer.alloc(first ? length - 4 : length),
    ]);
    const all = Buffer.concat([record(16384, true), record(16384, false), record(16384, false), record(16000, false)]);
    const hello = new HelloWatch(() => null);
    let reading = hello.fromClient(Buffer.alloc(0));
    let pieces = 0;
    for (let i = 0; i < all.length && 'forward' in reading; i++) {
      reading = hello.fromClient(all.subarray(i, i + 1));
      pieces += 1;
    }
    assert.deepEqual(reading, { refused: 'the TLS ClientHello came in too many pieces', alert: true });
    assert.equal(pieces, MAX_HELLO_PIECES + 1);
    assert.ok(hello.readings <= 4, `read ${hello.readings} times`);
  });

  it("node's own hello a byte at a time: read once per record boundary, and its name found", async () => {
    const bytes = await captureHello('crumbs.test');
    const names: Array<string | null> = [];
    const hello = new HelloWatch((name) => (names.push(name), null));
    let reading = hello.fromClient(Buffer.alloc(0));
    for (let i = 0; i < bytes.length && 'forward' in reading && !reading.checked; i++) {
      reading = hello.fromClient(bytes.subarray(i, i + 1));
    }
    assert.deepEqual(reading, { forward: bytes, checked: true });
    assert.deepEqual(names, ['crumbs.test']);
    assert.ok(hello.readings <= 3, `read ${hello.readings} times`);
  });
});
