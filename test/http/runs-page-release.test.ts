// An uncached runs page is freed as soon as it is written (src/http/release-after-send.ts): the bytes a client gets
// must be whole however slowly it reads, and a page the cache keeps must never be freed under a later request.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { releaseWhenSent } from '../../src/http/release-after-send.ts';

/** GET over a raw socket that reads a few KB at a time with pauses, so the server's write cannot finish at once. */
async function slowGet(base: string, path: string): Promise<string> {
  const { hostname, port } = new URL(base);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  socket.pause();
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: close\r\n\r\n`);
  const chunks: Buffer[] = [];
  await new Promise((r) => setTimeout(r, 50));
  for (;;) {
    const chunk = socket.read(4096) as Buffer | null;
    if (chunk) {
      chunks.push(chunk);
      await new Promise((r) => setTimeout(r, 1));
      continue;
    }
    if (socket.readableEnded) break;
    await Promise.race([once(socket, 'readable'), once(socket, 'end')]);
  }
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw.slice(raw.indexOf('\r\n\r\n') + 4);
}

describe('runs pages freed once sent', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    // Long briefs make a limit=500 page ~1 MB: far more than a socket takes at once.
    seedRuns(cp.deps, 600, { brief: 'b'.repeat(1800) });
  });
  after(() => cp.close());

  it('sends a whole page to a slow reader, byte for byte the same as a fast one', async () => {
    const path = '/v1/runs?limit=500&until=9000000000000';
    const slow = await slowGet(cp.url, path);
    assert.ok(slow.length > 900_000, `page of ${slow.length} bytes`);
    const fast = await cp.request('GET', path);
    assert.equal(slow, fast.text);
    assert.equal((JSON.parse(slow) as { items: unknown[] }).items.length, 500);
  });

  it('never frees a page the cache keeps: the same page asked again and again stays whole', async () => {
    const path = '/v1/runs?limit=500&until=9000000000001';
    const first = (await cp.request('GET', path)).text;
    for (let i = 0; i < 4; i++) assert.equal((await cp.request('GET', path)).text, first);
    assert.equal(await slowGet(cp.url, path), first);
  });
});

describe('releaseWhenSent', () => {
  let server: Server;
  let url = '';
  const seen: { whole: ArrayBuffer; view: ArrayBuffer; detachedWhileSending?: boolean }[] = [];
  before(async () => {
    server = createServer((req, res) => {
      if (req.url === '/big') {
        // 16 MB to a client that waits before reading: the write is still under way a turn later.
        const big = new Uint8Array(16 * 1024 * 1024).fill(122);
        releaseWhenSent(res, big);
        const entry: (typeof seen)[number] = { whole: big.buffer, view: new ArrayBuffer(0) };
        seen.push(entry);
        res.end(Buffer.from(big.buffer));
        setImmediate(() => (entry.detachedWhileSending = big.buffer.detached));
        return;
      }
      const whole = new Uint8Array(64 * 1024).fill(120);
      const pool = new Uint8Array(128).fill(121);
      const view = pool.subarray(16, 48);
      releaseWhenSent(res, whole);
      releaseWhenSent(res, view);
      seen.push({ whole: whole.buffer, view: pool.buffer });
      res.end(Buffer.concat([whole, view]));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(() => server.close());

  it('frees a buffer the body covers whole once the response finished, and never a view into another', async () => {
    const body = Buffer.from(await (await fetch(url)).arrayBuffer());
    assert.equal(body.length, 64 * 1024 + 32);
    assert.ok(body.subarray(0, 64 * 1024).every((b) => b === 120));
    const last = seen.at(-1)!;
    assert.equal(last.whole.detached, true);
    assert.equal(last.whole.byteLength, 0);
    assert.equal(last.view.detached, false, 'a view into a larger buffer is left alone');
    assert.equal(last.view.byteLength, 128);
  });

  it('leaves the buffer alone while the response is still being written to a slow reader', async () => {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write('GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    await new Promise((r) => setTimeout(r, 100));
    const entry = seen.at(-1)!;
    assert.equal(entry.detachedWhileSending, false, 'not freed while the kernel had not taken it all');
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    await once(socket, 'end');
    assert.ok(received > 16 * 1024 * 1024);
    assert.equal(entry.whole.detached, true, 'freed once the response finished');
  });
});
