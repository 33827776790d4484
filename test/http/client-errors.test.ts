import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { listen } from '../../src/http/http-server.ts';

/** Sends raw bytes and collects everything the server writes until it closes the socket. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let out = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (out += chunk));
    socket.on('close', () => resolve(out));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(out) : reject(err)));
  });
}

function envelope(response: string): { status: number; code: string } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(response)?.[1]);
  const body = JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
  return { status, code: body.error.code };
}

describe('requests refused before routing', () => {
  let server: Server;
  let port = 0;
  before(async () => {
    server = createServer({ maxHeaderSize: 8192 }, (_req, res) => res.end('ok'));
    ({ port } = await listen(server, '127.0.0.1', 0));
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('a malformed request line gets a 400 envelope', async () => {
    assert.deepEqual(envelope(await raw(port, 'GARBAGE\r\n\r\n')), { status: 400, code: 'bad_request' });
  });
  it('a bad header gets a 400 envelope', async () => {
    const res = await raw(port, 'GET / HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n');
    assert.deepEqual(envelope(res), { status: 400, code: 'bad_request' });
  });
  it('headers over the limit get a 431 envelope', async () => {
    const res = await raw(port, `GET / HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.deepEqual(envelope(res), { status: 431, code: 'header_too_large' });
  });
  it('CONNECT gets a 405 envelope', async () => {
    const res = await raw(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assert.deepEqual(envelope(res), { status: 405, code: 'method_not_allowed' });
  });
  it('the server still answers afterwards', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(await res.text(), 'ok');
  });
});
