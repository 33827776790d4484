// The fuzz sender (test/helpers/fuzz/send.ts) sends a request again only for the race Node's http docs name: a
// kept-alive socket the server closed as idle (past the keep-alive timeout it announced) as the request went out. A
// server that resets a connection it had kept alive for less than that is a finding the sender must report, not hide.
// A real server on port 0 that resets a connection at its second request.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createSender, type FuzzRequest } from '../helpers/fuzz/send.ts';

const get: FuzzRequest = { note: 'plain GET', route: 'GET /', method: 'GET', path: '/', headers: {}, mutating: false };

describe('the fuzz sender on a server that resets a kept-alive connection', () => {
  let server: Server;
  let url: string;
  before(async () => {
    const served = new WeakMap<Socket, number>();
    // Announces `Keep-Alive: timeout=2` (at 1 the agent would keep no socket) and never closes an idle connection
    // itself: only the handler resets one.
    server = createServer({ keepAliveTimeout: 2_000, keepAliveTimeoutBuffer: 60_000 }, (req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n > 1) req.socket.resetAndDestroy();
      else res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('reports a reset of a connection kept alive for less than the timeout the server announced', async () => {
    const sender = createSender(url, 1);
    try {
      assert.equal((await sender.send(get)).status, 200);
      const said = /on a kept-alive socket idle \d+ ms, the server announced 2000 ms$/;
      await assert.rejects(sender.send(get), { code: 'ECONNRESET', message: said });
    } finally {
      sender.close();
    }
  });

  it('sends again, on a socket of its own, a request on a connection idle past that timeout', async (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const sender = createSender(url, 1);
    try {
      assert.equal((await sender.send(get)).status, 200);
      t.mock.timers.tick(2_000);
      assert.equal((await sender.send(get)).status, 200);
    } finally {
      sender.close();
    }
  });
});
