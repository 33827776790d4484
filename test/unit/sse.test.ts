// The SSE writer's heartbeat: a ping each interval, and a reader that took nothing for a whole interval while bytes
// waited is dropped (the lag bound's other half; the byte bound is in test/http/events-stream.test.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { openSse } from '../../src/http/sse.ts';

/** A response whose reader has taken `taken` of the bytes written so far; the rest is pending. */
function fakeResponse() {
  const state = { sent: '', taken: 0, destroyed: false };
  const res = {
    req: { method: 'GET' },
    writeHead() {},
    write(chunk: string) {
      state.sent += chunk;
    },
    get writableLength() {
      return state.sent.length - state.taken;
    },
    on() {},
    end() {},
    destroy() {
      state.destroyed = true;
    },
  };
  return { res: res as unknown as ServerResponse, state };
}

describe('openSse heartbeat', () => {
  it('pings a reader that keeps up, and drops one that took nothing for a whole interval while bytes waited', (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const keeping = fakeResponse();
    const stalled = fakeResponse();
    openSse(keeping.res).write('data: 1\n\n');
    openSse(stalled.res).write('data: 1\n\n');
    for (let beat = 0; beat < 3; beat++) {
      keeping.state.taken = keeping.state.sent.length;
      t.mock.timers.tick(15_000);
    }
    assert.equal(keeping.state.destroyed, false);
    assert.equal(keeping.state.sent.split(': ping\n\n').length - 1, 3);
    assert.equal(stalled.state.destroyed, true);
  });
});

describe('openSse corking', () => {
  /** A response over a socket that counts its corks, as net.Socket does (uncork below zero is a no-op). */
  function corkedResponse() {
    const socket = {
      corked: 0,
      flushes: 0,
      cork() {
        this.corked++;
      },
      uncork() {
        if (this.corked > 0 && --this.corked === 0) this.flushes++;
      },
    };
    const { res, state } = fakeResponse();
    (res as unknown as { socket: typeof socket }).socket = socket;
    return { res, state, socket };
  }

  it('holds the writes of one turn for one flush in the check phase', async () => {
    const { res, state, socket } = corkedResponse();
    const sse = openSse(res);
    sse.write('data: 1\n\n');
    sse.write('data: 2\n\n');
    assert.equal(socket.corked, 1);
    assert.equal(socket.flushes, 0);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual({ corked: socket.corked, flushes: socket.flushes }, { corked: 0, flushes: 1 });
    assert.equal(state.sent, 'retry: 2000\n\ndata: 1\n\ndata: 2\n\n');
    sse.write('data: 3\n\n');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual({ corked: socket.corked, flushes: socket.flushes }, { corked: 0, flushes: 2 });
  });

  it('uncorks the socket it corked after the response let go of it (kept alive for the next request)', async () => {
    const { res, socket } = corkedResponse();
    openSse(res).write('data: 1\n\n');
    assert.equal(socket.corked, 1);
    (res as unknown as { socket: null }).socket = null;
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual({ corked: socket.corked, flushes: socket.flushes }, { corked: 0, flushes: 1 });
  });

  it('flushes at once past 256 KiB held, and corks again for the rest of the turn', async () => {
    const { res, state, socket } = corkedResponse();
    const sse = openSse(res);
    sse.write(`data: ${'x'.repeat(256 * 1024)}\n\n`);
    assert.deepEqual({ corked: socket.corked, flushes: socket.flushes }, { corked: 0, flushes: 1 });
    state.taken = state.sent.length;
    sse.write('data: 2\n\n');
    assert.equal(socket.corked, 1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual({ corked: socket.corked, flushes: socket.flushes }, { corked: 0, flushes: 2 });
  });
});
