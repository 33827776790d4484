// A CONNECT tunnel speaks TLS to the name the gate decided and no other. The attack: CONNECT an allowed name, then
// a ClientHello for another name served on the same address (a CDN, a cloud front end) — the server would answer
// as that other site with a certificate the client can verify. The gate reads the hello's server name (never
// decrypting anything) and refuses the tunnel before a byte reaches the destination. Loopback servers only.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { readClientHello } from '../../src/gate/client-hello.ts';
import { HelloWatch } from '../../src/gate/hello-retry.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { makeCert as makeCertFor } from '../trigger/standins.ts';
import {
  captureHello, gateConnect, getOverSocket, getOverTls, recordingConnect, startUpstream, tableResolver, tempDir,
  type Cert, type Upstream,
} from './helpers.ts';

describe('egress gate CONNECT server names', () => {
  const tmp = tempDir();
  const recorder = recordingConnect();
  const records: EgressRecord[] = [];
  let cert: Cert;
  let shared: Upstream;
  let gate: Gate;
  let at: { port: number };

  before(async () => {
    // One address serving two names, as a shared front end does.
    cert = makeCertFor(tmp.path, 'allowed.test', ['DNS:allowed.test', 'DNS:other.test', 'IP:127.0.0.2']);
    shared = await startUpstream('127.0.0.2', cert);
    const { resolve } = tableResolver({ 'allowed.test': ['127.0.0.2'], 'other.test': ['127.0.0.2'] });
    gate = await startGate({
      policy: parseGatePolicy({ allow: ['allowed.test', `127.0.0.2:${shared.port}`] }), tcpPort: 0, resolve,
      connect: recorder.connect, onRecord: (r) => records.push(r),
    });
    at = { port: gate.port ?? 0 };
  });

  after(async () => {
    await gate.close();
    await shared.close();
    tmp.remove();
  });

  async function lastRecord(count: number): Promise<EgressRecord> {
    for (let i = 0; i < 500 && records.length < count; i++) await new Promise((r) => setImmediate(r));
    const record = records[count - 1];
    if (!record) throw new Error('no record');
    return record;
  }

  it('refuses TLS for another name on the allowed address: no request reaches it, the record names it', async () => {
    const seen = shared.seen.length;
    const count = records.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened, 'the CONNECT itself is allowed');
    await assert.rejects(getOverTls(opened.socket, 'other.test', '/secret', cert.cert), 'the handshake fails');
    assert.equal(shared.seen.length, seen, 'the other name got no request');
    const record = await lastRecord(count + 1);
    assert.equal(record.decision, 'denied');
    assert.equal(record.host, 'allowed.test');
    assert.equal(record.sni, 'other.test');
    assert.match(record.reason ?? '', /other\.test.*not the CONNECT host allowed\.test/);
    assert.equal(record.bytesUp, 0, 'not a byte went to the destination');
  });

  it('lets TLS for the CONNECT host through, and records the name it carried', async () => {
    const count = records.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened);
    const text = await getOverTls(opened.socket, 'allowed.test', '/fine', cert.cert);
    assert.match(text, /upstream GET \/fine/);
    const record = await lastRecord(count + 1);
    assert.equal(record.decision, 'allowed');
    assert.equal(record.sni, 'allowed.test');
  });

  it('refuses a tunnel to a name whose hello carries no server name (the default site could be any)', async () => {
    const seen = shared.seen.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened);
    await assert.rejects(getOverTls(opened.socket, 'allowed.test', '/x', cert.cert, ''));
    assert.equal(shared.seen.length, seen);
    assert.match(records.at(-1)?.reason ?? '', /names no server/);
  });

  it('lets a tunnel to an IP literal through without a server name, and refuses one that names a host', async () => {
    const plain = await gateConnect(at, `127.0.0.2:${shared.port}`);
    assert.ok('socket' in plain);
    assert.match(await getOverTls(plain.socket, '127.0.0.2', '/literal', cert.cert), /upstream GET \/literal/);
    const seen = shared.seen.length;
    const named = await gateConnect(at, `127.0.0.2:${shared.port}`);
    assert.ok('socket' in named);
    await assert.rejects(getOverTls(named.socket, 'other.test', '/x', cert.cert));
    assert.equal(shared.seen.length, seen);
  });

  it('refuses a tunnel that does not start with TLS (plain HTTP could name any Host)', async () => {
    const seen = shared.seen.length;
    const count = records.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened);
    assert.equal(await getOverSocket(opened.socket, 'other.test', '/x'), '');
    assert.equal(shared.seen.length, seen);
    const record = await lastRecord(count + 1);
    assert.equal(record.decision, 'denied');
    assert.match(record.reason ?? '', /does not start with TLS/);
  });

  it('refuses a hello whose server name is no host name, and the destination gets no byte', async () => {
    const seen = shared.seen.length;
    const count = records.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened);
    opened.socket.write(handMadeHello(extension(0, serverNames([0, 'allowed.test/x']))));
    const record = await lastRecord(count + 1);
    opened.socket.destroy();
    assert.equal(record.decision, 'denied');
    assert.equal(record.reason, 'the TLS server name "allowed.test/x" is not a host name');
    assert.equal(shared.seen.length, seen);
  });

  it('reads a ClientHello that arrives a byte at a time', async () => {
    const hello = await captureHello('allowed.test');
    const count = records.length;
    const opened = await gateConnect(at, `allowed.test:${shared.port}`);
    assert.ok('socket' in opened);
    const socket = opened.socket;
    for (const byte of hello.subarray(0, -1)) {
      await new Promise<void>((r) => socket.write(Buffer.from([byte]), () => r()));
    }
    assert.equal(records.length, count, 'no verdict on a partial hello');
    socket.write(hello.subarray(-1));
    socket.destroy();
    const record = await lastRecord(count + 1);
    assert.equal(record.sni, 'allowed.test');
    assert.equal(record.decision, 'allowed');
  });
});

const u16 = (n: number): Buffer => Buffer.from([n >> 8, n & 255]);
const extension = (type: number, data: Buffer): Buffer => Buffer.concat([u16(type), u16(data.length), data]);
/** A server_name extension's data: a list of (name type, name) entries. */
const serverNames = (...entries: Array<[number, string]>): Buffer => {
  const list = Buffer.concat(entries.map(([type, name]) => Buffer.concat([Buffer.from([type]), u16(name.length),
    Buffer.from(name, 'latin1')])));
  return Buffer.concat([u16(list.length), list]);
};

/** A ClientHello in one TLS record, built by hand: `extensions` null sends none at all (TLS 1.2 may omit them). */
function handMadeHello(extensions: Buffer | null, message = 1): Buffer {
  const body = Buffer.concat([
    Buffer.alloc(2 + 32, 3), Buffer.from([0]), Buffer.from([0, 2, 0x13, 0x01]), Buffer.from([1, 0]),
    ...(extensions ? [u16(extensions.length), extensions] : []),
  ]);
  const handshake = Buffer.concat([Buffer.from([message, 0]), u16(body.length), body]);
  return Buffer.concat([Buffer.from([22, 3, 1]), u16(handshake.length), handshake]);
}

describe('ClientHello reading', () => {
  it('refuses each malformed hello with its reason', () => {
    const malformed = (reason: string) => ({ kind: 'malformed', reason });
    const named = (...entries: Array<[number, string]>) => handMadeHello(extension(0, serverNames(...entries)));
    const bare = handMadeHello(null);
    assert.deepEqual(readClientHello(bare), { kind: 'hello', serverName: null, end: bare.length });
    assert.deepEqual(readClientHello(named([0, 'a.test'], [0, 'b.test'])),
      malformed('the TLS ClientHello names a server twice'));
    assert.deepEqual(readClientHello(named([0, 'a test'])), malformed('the TLS server name is not an ASCII host name'));
    assert.deepEqual(readClientHello(named([0, ''])), malformed('the TLS server name is not an ASCII host name'));
    assert.deepEqual(readClientHello(named([1, 'a.test'])),
      malformed('the TLS server_name extension holds no host name'));
    const trailing = handMadeHello(extension(0, Buffer.concat([serverNames([0, 'a.test']), Buffer.from([0])])));
    assert.deepEqual(readClientHello(trailing), malformed('the TLS server_name extension has trailing bytes'));
    assert.deepEqual(readClientHello(handMadeHello(Buffer.from([0, 0, 0, 9]))),
      malformed('the TLS ClientHello is cut short'));
    assert.deepEqual(readClientHello(handMadeHello(null, 2)), malformed('the first TLS message is not a ClientHello'));
    assert.deepEqual(readClientHello(Buffer.from([22, 3, 1, 0, 4, 1, 1, 0, 1])),
      malformed('the TLS ClientHello is too large'));
    assert.deepEqual(readClientHello(Buffer.alloc(64 * 1024 + 1, 22)), malformed('the TLS ClientHello is too large'));
    assert.deepEqual(readClientHello(Buffer.from([22, 3, 1, 0, 0])), malformed('a TLS record length is out of range'));
    assert.deepEqual(readClientHello(Buffer.from([22, 2, 0, 0, 4, 1, 0, 0, 0])), { kind: 'not-tls' });
  });

  it('assembles a hello whose second record arrives after the first is whole', async () => {
    const body = (await captureHello('parts.test')).subarray(5);
    const record = (part: Buffer) => Buffer.concat([Buffer.from([22, 3, 1]), u16(part.length), part]);
    const split = Buffer.concat([record(body.subarray(0, 40)), record(body.subarray(40))]);
    const names: Array<string | null> = [];
    const hello = new HelloWatch((name) => (names.push(name), null));
    const waiting = { forward: Buffer.alloc(0), checked: false };
    assert.deepEqual(hello.fromClient(split.subarray(0, 46)), waiting);
    assert.deepEqual(hello.fromClient(split.subarray(46, 49)), waiting);
    assert.deepEqual(hello.fromClient(split.subarray(49)), { forward: split, checked: true });
    assert.deepEqual(names, ['parts.test']);
    assert.equal(hello.readings, 2, 'read again only once the second record was whole');
  });

  it('finds the server name, or none, in what node sends', async () => {
    const bytes = await captureHello('Example.TEST');
    assert.deepEqual(readClientHello(bytes), { kind: 'hello', serverName: 'example.test', end: bytes.length });
    const unnamed = await captureHello(undefined);
    assert.deepEqual(readClientHello(unnamed), { kind: 'hello', serverName: null, end: unnamed.length });
  });

  it('reads a hello split over two TLS records, and waits while any of it is missing', async () => {
    const hello = await captureHello('split.test');
    const body = hello.subarray(5);
    const header = (part: Buffer) => Buffer.from([22, 3, 1, part.length >> 8, part.length & 255]);
    const record = (part: Buffer) => Buffer.concat([header(part), part]);
    const split = Buffer.concat([record(body.subarray(0, 40)), record(body.subarray(40))]);
    assert.deepEqual(readClientHello(split), { kind: 'hello', serverName: 'split.test', end: split.length });
    for (const cut of [1, 4, 5, 44, 46, split.length - 1]) {
      assert.deepEqual(readClientHello(split.subarray(0, cut)), { kind: 'more' }, `cut at ${cut}`);
    }
  });

  it('refuses a hello that names a server twice, and bytes that are not TLS', async () => {
    const hello = await captureHello('one.test');
    // Rename the extension after server_name's to server_name: two names, one for the gate, one for the server.
    const text = hello.toString('latin1');
    const at = text.indexOf('one.test') + 'one.test'.length;
    const doubled = Buffer.from(hello);
    doubled.writeUInt16BE(0, at);
    assert.equal(readClientHello(doubled).kind, 'malformed');
    assert.deepEqual(readClientHello(Buffer.from('GET / HTTP/1.1\r\n')), { kind: 'not-tls' });
  });

  it('refuses a first TLS record followed by something that is not the rest of the hello', async () => {
    const hello = await captureHello('x.test');
    const cut = Buffer.concat([hello.subarray(0, 5), hello.subarray(5, 30)]);
    cut.writeUInt16BE(25, 3);
    const followed = Buffer.concat([cut, Buffer.from([23, 3, 3, 0, 1, 0])]);
    assert.equal(readClientHello(followed).kind, 'malformed');
  });
});
