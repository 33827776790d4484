// A TLS 1.3 HelloRetryRequest makes the client send a second ClientHello on the same tunnel. The attack: the first
// names the allowed CONNECT host, the server (forced to retry by the client) is asked again with another name served
// on the same address. The gate reads every ClientHello until the server's real ServerHello and refuses a second one
// naming another host before a byte of it reaches the destination; a genuine retry still gets through. Records are
// crafted by hand on loopback; the genuine retry is node's own TLS against a server that wants another key share.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { readClientHello } from '../../src/gate/client-hello.ts';
import { HelloWatch, MAX_HELLO_PIECES } from '../../src/gate/hello-retry.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { makeCert as makeCertFor } from '../trigger/standins.ts';
import { captureHello, gateConnect, recordingConnect, tableResolver, tempDir } from './helpers.ts';

const RETRY_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

/** A ServerHello record (TLS 1.3 shape: supported_versions, a key_share group); `random` says whether it is a retry. */
function serverHello(random: Buffer): Buffer {
  const extensions = Buffer.from([0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 2, 0, 0x18]);
  const body = Buffer.concat([Buffer.from([3, 3]), random, Buffer.from([0, 0x13, 1, 0, 0, extensions.length]),
    extensions]);
  const message = Buffer.concat([Buffer.from([2, 0, body.length >> 8, body.length & 255]), body]);
  return Buffer.concat([Buffer.from([22, 3, 3, message.length >> 8, message.length & 255]), message]);
}
const CHANGE_CIPHER_SPEC = Buffer.from([20, 3, 3, 0, 1, 1]);

interface RetryServer {
  port: number;
  /** Every byte each connection received, once the gate closed it. */
  received: Array<Promise<Buffer>>;
  close(): Promise<void>;
}

/** A raw stand-in that answers the first ClientHello it reads with a HelloRetryRequest and records all it gets. */
async function startRetryServer(host: string): Promise<RetryServer> {
  const received: Array<Promise<Buffer>> = [];
  const server = createTcpServer((socket) => {
    let seen = Buffer.alloc(0);
    let retried = false;
    socket.on('error', () => {});
    received.push(new Promise((resolve) => socket.on('close', () => resolve(seen))));
    socket.on('data', (d: Buffer) => {
      seen = Buffer.concat([seen, d]);
      if (!retried && readClientHello(seen).kind === 'hello') {
        retried = true;
        socket.write(Buffer.concat([serverHello(RETRY_RANDOM), CHANGE_CIPHER_SPEC]));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('a second ClientHello on a tunnel (TLS 1.3 HelloRetryRequest)', () => {
  const tmp = tempDir();
  const records: EgressRecord[] = [];
  let retrying: RetryServer;
  let gate: Gate;
  let genuine: ReturnType<typeof createTlsServer>;
  let genuinePort = 0;
  let cert: { key: Buffer; cert: Buffer };

  before(async () => {
    retrying = await startRetryServer('127.0.0.2');
    cert = makeCertFor(tmp.path, 'allowed.test', ['DNS:allowed.test', 'DNS:other.test', 'DNS:real.test']);
    // The client offers a key share for X25519 (and its hybrid) only: a server that takes P-384 alone must retry.
    genuine = createTlsServer({ key: cert.key, cert: cert.cert, ecdhCurve: 'secp384r1' }, (s) => s.end('genuine'));
    await new Promise<void>((resolve) => genuine.listen(0, '127.0.0.3', resolve));
    genuinePort = (genuine.address() as AddressInfo).port;
    gate = await startGate({
      policy: parseGatePolicy({ allow: ['allowed.test', 'real.test', `127.0.0.2:${retrying.port}`,
        `127.0.0.3:${genuinePort}`] }),
      tcpPort: 0, resolve: tableResolver({ 'allowed.test': ['127.0.0.2'], 'real.test': ['127.0.0.3'] }).resolve,
      connect: recordingConnect().connect, onRecord: (r) => records.push(r),
    });
  });

  after(async () => {
    await gate.close();
    await retrying.close();
    await new Promise((resolve) => genuine.close(resolve));
    tmp.remove();
  });

  async function recordAfter(count: number): Promise<EgressRecord> {
    for (let i = 0; i < 500 && records.length <= count; i++) await new Promise((r) => setImmediate(r));
    const record = records[count];
    if (!record) throw new Error('no record');
    return record;
  }

  /** Opens a tunnel to allowed.test, sends `first`, then `second` once the retry request arrived (or at once). */
  async function twoHellos(first: Buffer, second: Buffer, waitForRetry: boolean) {
    const opened = await gateConnect({ port: gate.port ?? 0 }, `allowed.test:${retrying.port}`);
    assert.ok('socket' in opened, 'the CONNECT itself is allowed');
    const socket: Socket = opened.socket;
    const count = records.length;
    const answer = await new Promise<Buffer>((resolve) => {
      let got = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        if (waitForRetry && got.includes(RETRY_RANDOM)) {
          waitForRetry = false;
          socket.write(second);
          setImmediate(() => socket.end());
        }
      });
      socket.on('close', () => resolve(got));
      socket.on('error', () => {});
      socket.write(waitForRetry ? first : Buffer.concat([first, second]));
      if (!waitForRetry) socket.end();
    });
    const upstreamGot = await retrying.received.at(-1)!;
    return { answer, upstreamGot, record: await recordAfter(count) };
  }

  it('refuses a second hello for another name after the retry request; the destination never gets it', async () => {
    const first = await captureHello('allowed.test');
    const { answer, upstreamGot, record } = await twoHellos(first, await captureHello('other.test'), true);
    assert.ok(answer.includes(RETRY_RANDOM), 'the client got the retry request');
    assert.equal(answer.at(-7), 21, 'then a TLS alert');
    assert.deepEqual(upstreamGot, first, 'the destination got the first hello and nothing else');
    assert.equal(record.decision, 'denied');
    assert.equal(record.sni, 'allowed.test');
    assert.match(record.reason ?? '', /second TLS ClientHello.*"other\.test" is not the CONNECT host allowed\.test/);
  });

  it('refuses a second hello sent right behind the first, unasked, before it reaches the destination', async () => {
    const first = await captureHello('allowed.test');
    const { upstreamGot, record } = await twoHellos(first, await captureHello('other.test'), false);
    assert.equal(upstreamGot.includes(Buffer.from('other.test')), false);
    assert.equal(record.decision, 'denied');
    assert.match(record.reason ?? '', /second TLS ClientHello/);
  });

  it('refuses a second hello hidden in the first hello\'s record', async () => {
    const first = await captureHello('allowed.test');
    const other = (await captureHello('other.test')).subarray(5);
    const both = Buffer.concat([first.subarray(5), other]);
    const record = Buffer.concat([Buffer.from([22, 3, 1, both.length >> 8, both.length & 255]), both]);
    const count = records.length;
    const opened = await gateConnect({ port: gate.port ?? 0 }, `allowed.test:${retrying.port}`);
    assert.ok('socket' in opened);
    opened.socket.on('error', () => {});
    opened.socket.end(record);
    assert.equal((await recordAfter(count)).reason, 'the TLS ClientHello shares a record with another message');
    assert.equal((await retrying.received.at(-1)!).length, 0, 'the destination got no byte');
  });

  it('passes a second hello for the same name, with what the client sends around it', async () => {
    const first = await captureHello('allowed.test');
    const second = Buffer.concat([CHANGE_CIPHER_SPEC, await captureHello('allowed.test')]);
    const { upstreamGot, record } = await twoHellos(first, second, true);
    assert.deepEqual(upstreamGot, Buffer.concat([first, second]));
    assert.equal(record.decision, 'allowed');
  });

  it("lets node's own TLS through a server that asks it to retry with another key share", async () => {
    const count = records.length;
    const opened = await gateConnect({ port: gate.port ?? 0 }, `real.test:${genuinePort}`);
    assert.ok('socket' in opened);
    let group: string | undefined;
    const text = await new Promise<string>((resolve, reject) => {
      const tls: TLSSocket = tlsConnect({
        socket: opened.socket, host: 'real.test', servername: 'real.test', ca: cert.cert,
      });
      let got = '';
      tls.on('secureConnect', () => (group = (tls.getEphemeralKeyInfo() as { name?: string } | null)?.name));
      tls.on('data', (d: Buffer) => (got += d.toString()));
      tls.on('end', () => resolve(got));
      tls.on('error', reject);
    });
    assert.equal(text, 'genuine');
    // P-384 is in the client's groups but not among its first key shares: agreeing on it took a retry.
    assert.equal(group, 'secp384r1');
    const record = await recordAfter(count);
    assert.equal(record.decision, 'allowed');
    assert.equal(record.sni, 'real.test');
  });
});

describe('a client that half-closes before the server\'s ServerHello', () => {
  const records: EgressRecord[] = [];
  let server: ReturnType<typeof createTcpServer>;
  let gate: Gate;

  before(async () => {
    // A server that answers a hello only once the client has ended its side (the client's FIN must reach it).
    server = createTcpServer({ allowHalfOpen: true }, (socket) => {
      let seen = Buffer.alloc(0);
      socket.on('error', () => {});
      socket.on('data', (d: Buffer) => (seen = Buffer.concat([seen, d])));
      socket.on('end', () => {
        if (readClientHello(seen).kind !== 'hello') return void socket.end();
        socket.write(serverHello(Buffer.alloc(32, 7)));
        setTimeout(() => socket.end('after-hello'), 50);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    const port = (server.address() as AddressInfo).port;
    gate = await startGate({
      policy: parseGatePolicy({ allow: ['allowed.test', `127.0.0.2:${port}`] }), tcpPort: 0,
      resolve: tableResolver({ 'allowed.test': ['127.0.0.2'] }).resolve, connect: recordingConnect().connect,
      onRecord: (r) => records.push(r),
    });
  });

  after(async () => {
    await gate.close();
    await new Promise((resolve) => server.close(resolve));
  });

  const ends: Array<[string, Buffer]> = [['its hello', Buffer.alloc(0)], ['half a record more', Buffer.from([23, 3, 3])]];
  for (const [what, after] of ends) {
    it(`keeps the tunnel when it ends after ${what}: the server gets the end, the client its whole answer`, async () => {
      const hello = await captureHello('allowed.test');
      const port = (server.address() as AddressInfo).port;
      const opened = await gateConnect({ port: gate.port ?? 0 }, `allowed.test:${port}`);
      assert.ok('socket' in opened);
      const count = records.length;
      const answer = await new Promise<Buffer>((resolve) => {
        let got = Buffer.alloc(0);
        opened.socket.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
        opened.socket.on('close', () => resolve(got));
        opened.socket.on('error', () => {});
        opened.socket.end(Buffer.concat([hello, after]));
      });
      assert.equal(answer.toString('latin1').endsWith('after-hello'), true, 'the server\'s last bytes arrived');
      for (let i = 0; i < 500 && records.length <= count; i++) await new Promise((r) => setImmediate(r));
      assert.equal(records[count]?.reason, null);
      assert.equal(records[count]?.bytesUp, hello.length + after.length);
    });
  }
});

/** `hello` (one record) told over `count` handshake records. */
function inRecords(hello: Buffer, count: number): Buffer {
  const message = hello.subarray(5);
  const step = Math.ceil(message.length / count);
  const records: Buffer[] = [];
  for (let at = 0; at < message.length; at += step) {
    const part = message.subarray(at, at + step);
    records.push(Buffer.from([22, 3, 1, part.length >> 8, part.length & 255]), part);
  }
  return Buffer.concat(records);
}

describe('HelloWatch', () => {
  const pass = (name: string | null) => (name === 'a.test' ? null : `"${name}" is not a.test`);
  const APPLICATION_DATA = Buffer.concat([Buffer.from([23, 3, 3, 0, 100]), Buffer.alloc(100, 9)]);

  it('holds a half record, and reads later client records unread once the server sent its real hello', async () => {
    const watch = new HelloWatch(pass);
    const first = await captureHello('a.test');
    assert.deepEqual(watch.fromClient(first), { forward: first, checked: true });
    const record = Buffer.from([23, 3, 3, 0, 1, 9]);
    assert.deepEqual(watch.fromClient(record), { forward: record, checked: true });
    assert.deepEqual(watch.fromClient(Buffer.from([23, 3, 3])), { forward: Buffer.alloc(0), checked: true });
    assert.equal(watch.fromServer(serverHello(RETRY_RANDOM)), null, 'a retry request keeps the watch');
    const held = watch.fromServer(Buffer.concat([CHANGE_CIPHER_SPEC, serverHello(Buffer.alloc(32, 7))]));
    assert.deepEqual(held, Buffer.from([23, 3, 3]), 'the held bytes go on when the watch ends');
    // A TLS 1.2 client's encrypted Finished is a handshake record of random bytes: never read as a hello now.
    const finished = Buffer.from([22, 3, 3, 0, 4, 1, 0, 0, 9]);
    assert.deepEqual(watch.fromClient(finished), { forward: finished, checked: true });
  });

  it('reads the first hello like any other: refused, with the reason it always had', async () => {
    const other = await captureHello('other.test');
    assert.deepEqual(new HelloWatch(pass).fromClient(other), { refused: '"other.test" is not a.test', alert: true });
    assert.deepEqual(new HelloWatch(pass).fromClient(APPLICATION_DATA),
      { refused: 'the tunnel does not start with TLS', alert: false });
    const second = new HelloWatch(pass);
    second.fromClient(await captureHello('a.test'));
    assert.deepEqual(second.fromClient(other),
      { refused: 'a second TLS ClientHello on the tunnel: "other.test" is not a.test', alert: true });
  });

  it('refuses hellos spread over more records than a tunnel allows, the first or later ones together', async () => {
    const hello = await captureHello('a.test');
    const refusal = { refused: 'the TLS ClientHello came in too many records', alert: true };
    assert.deepEqual(new HelloWatch(pass).fromClient(inRecords(hello, 100)), refusal);
    const watch = new HelloWatch(pass);
    assert.equal('forward' in watch.fromClient(inRecords(hello, 40)), true, 'one hello in 40 records passes');
    assert.deepEqual(watch.fromClient(inRecords(hello, 40)), refusal);
    // A 60 KB hello announced, then sent as records of one byte: refused at the limit, not read 60,000 times.
    const crumbs = new HelloWatch(pass);
    let reading = crumbs.fromClient(Buffer.from([22, 3, 3, 0, 4, 1, 0, 0xea, 0x60]));
    for (let i = 0; i < 1000 && 'forward' in reading; i++) reading = crumbs.fromClient(Buffer.from([22, 3, 3, 0, 1, 0]));
    assert.deepEqual(reading, refusal);
    assert.ok(crumbs.readings <= 64, `read ${crumbs.readings} times`);
  });

  it("counts only hello pieces: a client's early data in many pieces before the ServerHello passes", async () => {
    const watch = new HelloWatch(pass);
    watch.fromClient(await captureHello('a.test'));
    const forwarded: Buffer[] = [];
    // Records of 105 bytes in pieces of 30: each record goes on once whole.
    for (let i = 0; i < MAX_HELLO_PIECES + 12; i++) {
      const reading = watch.fromClient(APPLICATION_DATA.subarray((i % 4) * 30, (i % 4) * 30 + 30));
      assert.ok('forward' in reading, `piece ${i}`);
      forwarded.push(reading.forward);
    }
    assert.equal(Buffer.concat(forwarded).length, (MAX_HELLO_PIECES + 12) / 4 * APPLICATION_DATA.length);
  });

  it('forwards a retried hello at once after early data longer than it, the early data whole', async () => {
    const watch = new HelloWatch(pass);
    const hello = await captureHello('a.test');
    const early = Buffer.concat([Buffer.from([23, 3, 3, 0x40, 0]), Buffer.alloc(0x4000, 5)]);
    assert.deepEqual(watch.fromClient(Buffer.concat([hello, CHANGE_CIPHER_SPEC, early])),
      { forward: Buffer.concat([hello, CHANGE_CIPHER_SPEC, early]), checked: true });
    assert.equal(watch.fromServer(serverHello(RETRY_RANDOM)), null);
    assert.ok(hello.length < early.length);
    assert.deepEqual(watch.fromClient(hello), { forward: hello, checked: true }, 'not held for the early data\'s size');
  });

  it('reads a retry request split over records and pieces', () => {
    const watch = new HelloWatch(pass);
    const message = serverHello(RETRY_RANDOM).subarray(5);
    const records = Buffer.concat([Buffer.from([22, 3, 3, 0, 20]), message.subarray(0, 20),
      Buffer.from([22, 3, 3, 0, message.length - 20]), message.subarray(20)]);
    for (const byte of records) assert.equal(watch.fromServer(Buffer.from([byte])), null);
    assert.deepEqual(watch.fromServer(serverHello(Buffer.alloc(32))), Buffer.alloc(0), 'the real hello ends it');
    assert.equal(watch.fromServer(serverHello(RETRY_RANDOM)), null, 'and nothing after is read');
  });
});
