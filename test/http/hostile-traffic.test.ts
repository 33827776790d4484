// Hostile traffic against the real servers on 127.0.0.1, at small and polite volumes: each bound is shown enforced by
// what the server itself counts (open connections, stream subscribers, audit rows), never by how long anything took.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { openSseClient } from '../helpers/sse-client.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startTestTrigger, type TestTrigger } from '../trigger/helpers.ts';
import { createHttpServer, listen, readConnectionLimits } from '../../src/http/http-server.ts';
import type { EventRow } from '../../src/db/events-store.ts';

/** A raw client socket on 127.0.0.1 that records what it received, when the server ended it and when it closed. */
interface RawClient {
  socket: Socket;
  received(): string;
  /** The server's FIN (or the socket closed). */
  ended: Promise<void>;
  closed: Promise<void>;
}

/**
 * `halfOpen` makes the hostile kind of client: it never answers the server's FIN with its own, so only the server
 * destroying the socket frees it (a polite client closing on FIN would hide a server that only half-closes).
 */
function openRaw(port: number, { halfOpen = false } = {}): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: halfOpen });
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', () => {});
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    const ended = new Promise<void>((r) => {
      socket.once('end', () => r());
      void closed.then(r);
    });
    socket.once('connect', () => resolve({ socket, received: () => text, ended, closed }));
    socket.once('error', reject);
  });
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Status code and JSON error code of the one raw response in `text`. */
function answerOf(text: string): { status: number; code: string | undefined } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  let code: string | undefined;
  try {
    code = (JSON.parse(body) as { error?: { code?: string } }).error?.code;
  } catch {
    code = undefined;
  }
  return { status, code };
}

async function settled(counts: ReturnType<typeof createHttpServer>['connections'], total: number): Promise<void> {
  await waitFor(() => counts.total() === total, `server connection count back to ${total}`);
}

/**
 * Streams an endless chunked body after `head` until the server closes the socket; answers the bytes the client got
 * to write. Stops and fails past `ceiling`: a server draining the body would let it write without end.
 */
async function endlessBody(port: number, head: string, ceiling: number): Promise<{ sent: number; answer: string }> {
  const client = await openRaw(port);
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const framed = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
  client.socket.write(head);
  let sent = 0;
  let open = true;
  void client.closed.then(() => (open = false));
  while (open && sent < ceiling) {
    sent += framed.length;
    if (!client.socket.write(framed)) {
      await new Promise<void>((r) => {
        client.socket.once('drain', r);
        void client.closed.then(r);
      });
    }
  }
  if (open) client.socket.destroy();
  return { sent, answer: client.received() };
}

describe('hostile traffic: Control Plane event streams', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ settings: { streams: { total: 6, perRun: 3 } } });
    for (const run of ['lag', 'capped', 'calm']) cp.deps.stores.runs.upsert('local', makeRun(0, { run, status: 'running' }));
  });
  after(() => cp.close());

  let nextId = 1_000_000;
  /** Publishes one ~256 KiB event of the run straight onto the bus, as an ingest commit would. */
  function publishBig(run: string): void {
    const id = nextId++;
    const row: EventRow = { id, source: 'local', run, seq: id, ts: Date.now(), kind: 'log', data: JSON.stringify({ text: 'x'.repeat(256 * 1024) }) };
    cp.deps.bus.publish([row]);
  }

  it('drops a subscriber that reads nothing once it is 4 MiB behind, and keeps the one that reads', async () => {
    const baseline = { subscribers: cp.deps.bus.size(), connections: cp.running.connections.total() };
    const reader = await openSseClient(`${cp.url}/v1/runs/local/lag/stream`);
    const silent = await openRaw(portOf(cp.url));
    silent.socket.write(`GET /v1/runs/local/lag/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`);
    silent.socket.pause();
    await waitFor(() => cp.deps.bus.size() === baseline.subscribers + 2, 'both subscribed');
    // Loopback socket buffers take several MB before the server's own buffer grows; 400 events (100 MiB) is the ceiling.
    let published = 0;
    while (cp.deps.bus.size() === baseline.subscribers + 2 && published < 400) {
      publishBig('lag');
      published++;
      // The reader takes each event before the next goes out, so only the silent subscriber falls behind.
      await reader.waitFor((c) => c.events().length === published, 60_000);
    }
    assert.equal(cp.deps.bus.size(), baseline.subscribers + 1, `the silent subscriber was dropped (after ${published} events)`);
    assert.equal(reader.events().length, published, 'the reading subscriber got every event');
    reader.close();
    silent.socket.destroy();
    await waitFor(() => cp.deps.bus.size() === baseline.subscribers, 'subscribers back to baseline');
    await settled(cp.running.connections, baseline.connections);
  });

  it('refuses a run stream past the per-run cap with 429 and admits one again when a stream ends', async () => {
    const open = [];
    for (let i = 0; i < 3; i++) open.push(await openSseClient(`${cp.url}/v1/runs/local/capped/stream`));
    const refused = await cp.request('GET', '/v1/runs/local/capped/stream');
    assert.equal(refused.status, 429);
    assert.equal(refused.json.error.code, 'too_many_requests');
    assert.equal(refused.headers.get('retry-after'), '30');
    const before = cp.deps.bus.size();
    open.pop()!.close();
    await waitFor(() => cp.deps.bus.size() === before - 1, 'a stream ended');
    const again = await openSseClient(`${cp.url}/v1/runs/local/capped/stream`);
    assert.equal(again.status, 200);
    open.push(again);
    // Other runs are not affected by this run's cap.
    const calm = await openSseClient(`${cp.url}/v1/runs/local/calm/stream`);
    assert.equal(calm.status, 200);
    open.push(calm);
    for (const c of open) c.close();
    await waitFor(() => cp.deps.bus.size() === 0, 'every stream ended');
  });

  it('refuses any stream past the total cap with 429', async () => {
    const open = [];
    for (let i = 0; i < 6; i++) open.push(await openSseClient(`${cp.url}/v1/stream`));
    const refused = await cp.request('GET', '/v1/stream');
    assert.equal(refused.status, 429);
    assert.equal(refused.json.error.code, 'too_many_requests');
    for (const c of open) c.close();
    await waitFor(() => cp.deps.bus.size() === 0, 'every stream ended');
  });
});

/** A Control Plane and a trigger server for one describe block, closed after it. */
function bothServers(): { cp: TestControl; trigger: TestTrigger } {
  const servers = {} as { cp: TestControl; trigger: TestTrigger };
  before(async () => {
    servers.cp = await startTestControl();
    servers.trigger = await startTestTrigger();
  });
  after(async () => {
    await servers.cp.close();
    await servers.trigger.cleanup();
  });
  return servers;
}

describe('hostile traffic: refused bodies are not drained', () => {
  const servers = bothServers();

  // 1 MiB limit; what a paused socket and the kernel buffers take is a few MB, so 64 MiB means it was being drained.
  const CEILING = 64 * 1024 * 1024;

  it('answers 413 to an endless chunked body on the Control Plane and closes the socket without reading on', async () => {
    const baseline = servers.cp.running.connections.total();
    const head = 'POST /v1/start HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    const { sent, answer } = await endlessBody(portOf(servers.cp.url), head, CEILING);
    assert.deepEqual(answerOf(answer), { status: 413, code: 'payload_too_large' });
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.ok(sent < CEILING, `the server stopped reading (the client wrote ${sent} bytes)`);
    await settled(servers.cp.running.connections, baseline);
  });

  it('answers 413 to an endless chunked body on the trigger server and closes the socket without reading on', async () => {
    const baseline = servers.trigger.connections.total();
    const head = 'POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    const { sent, answer } = await endlessBody(portOf(servers.trigger.url), head, CEILING);
    assert.equal(answerOf(answer).status, 413);
    assert.ok(sent < CEILING, `the server stopped reading (the client wrote ${sent} bytes)`);
    await settled(servers.trigger.connections, baseline);
  });

  it('closes the connection of a request refused before its body was read (401 with a body still coming)', async () => {
    const secured = await startTestControl({ token: 'hostile-traffic-token' });
    try {
      const head = 'POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
      const { sent, answer } = await endlessBody(portOf(secured.url), head, CEILING);
      assert.deepEqual(answerOf(answer), { status: 401, code: 'unauthorized' });
      assert.ok(sent < CEILING, `the server stopped reading (the client wrote ${sent} bytes)`);
      await settled(secured.running.connections, 0);
    } finally {
      await secured.close();
    }
  });
});

describe('hostile traffic: connections', () => {
  it('keeps a keep-alive connection open after refusing a request that has no body', async () => {
    const cp = await startTestControl();
    try {
      const client = await openRaw(portOf(cp.url));
      const get = 'GET /v1/nothing-here HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
      client.socket.write(get + get);
      await waitFor(() => client.received().split('HTTP/1.1 404').length === 3, 'two 404 answers on one socket');
      assert.doesNotMatch(client.received(), /connection: close/i);
      assert.equal(cp.running.connections.total(), 1);
      client.socket.destroy();
    } finally {
      await cp.close();
    }
  });

  it('closes a socket after answering a malformed request, though the client never hangs up', async () => {
    const cp = await startTestControl();
    // Node's own timeouts off, so only the answer's own close can free the socket.
    cp.running.server.headersTimeout = 0;
    cp.running.server.requestTimeout = 0;
    try {
      const client = await openRaw(portOf(cp.url), { halfOpen: true });
      client.socket.write('NOT HTTP AT ALL\r\n\r\n');
      await client.ended;
      assert.equal(answerOf(client.received()).status, 400);
      await settled(cp.running.connections, 0);
      client.socket.destroy();
    } finally {
      await cp.close();
    }
  });

  it('answers 408 to sockets that send nothing and closes them (the shared server factory, timeouts shortened)', async () => {
    const { server, connections } = createHttpServer((_req, res) => res.end(), readConnectionLimits({}, 'control'));
    server.headersTimeout = 300;
    server.requestTimeout = 600;
    const { port } = await listen(server, '127.0.0.1', 0);
    try {
      const silent = await Promise.all([1, 2, 3].map(() => openRaw(port, { halfOpen: true })));
      await waitFor(() => connections.total() === 3, 'three connections counted');
      await Promise.all(silent.map((c) => c.ended));
      for (const c of silent) assert.deepEqual(answerOf(c.received()), { status: 408, code: 'request_timeout' });
      await settled(connections, 0);
      for (const c of silent) c.socket.destroy();
    } finally {
      server.close();
    }
  });

  it('refuses a connection past the per-peer cap with 503 and admits one again when another closes', async () => {
    const cp = await startTestControl({ settings: { connections: { total: 10, perPeer: 2 } } });
    try {
      const held = [await openRaw(portOf(cp.url)), await openRaw(portOf(cp.url))];
      await waitFor(() => cp.running.connections.total() === 2, 'two connections counted');
      const third = await openRaw(portOf(cp.url), { halfOpen: true });
      await third.ended;
      const answer = answerOf(third.received());
      assert.deepEqual(answer, { status: 503, code: 'unavailable' });
      assert.match(third.received(), /2 connections from 127\.0\.0\.1/);
      assert.equal(cp.running.connections.total(), 2, 'the refused socket was never counted');
      third.socket.destroy();
      held.pop()!.socket.destroy();
      await settled(cp.running.connections, 1);
      const res = await fetch(`${cp.url}/health`);
      assert.equal(res.status, 200);
      for (const c of held) c.socket.destroy();
    } finally {
      await cp.close();
    }
  });

  it('refuses a connection past the total cap on the trigger server with 503', async () => {
    const trigger = await startTestTrigger({ SVC_TRIGGER_MAX_CONNECTIONS: '2', SVC_TRIGGER_MAX_CONNECTIONS_PER_PEER: '2' });
    try {
      const held = [await openRaw(portOf(trigger.url)), await openRaw(portOf(trigger.url))];
      await waitFor(() => trigger.connections.total() === 2, 'two connections counted');
      const third = await openRaw(portOf(trigger.url), { halfOpen: true });
      await third.ended;
      assert.deepEqual(answerOf(third.received()), { status: 503, code: 'unavailable' });
      assert.match(third.received(), /2 connections in total/);
      third.socket.destroy();
      for (const c of held) c.socket.destroy();
      await settled(trigger.connections, 0);
    } finally {
      await trigger.cleanup();
    }
  });
});

describe('hostile traffic: a drive-by page grows the audit log by rows per window, not per request', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  it('writes the first refused cross-origin POST at once and the next 49 as one counted row', async () => {
    const before = cp.deps.stores.audit.list({ limit: 1 }).items[0]?.id ?? 0;
    for (let i = 0; i < 50; i++) {
      const res = await cp.request('POST', '/v1/runs/local/r1/stop', { body: {}, headers: { origin: 'http://drive-by.example' } });
      assert.equal(res.status, 403);
    }
    const rows = () => cp.deps.stores.audit.list({ limit: 10 }).items.filter((e) => e.id > before);
    assert.equal(rows().length, 1, 'one row while the window is open');
    assert.equal(rows()[0]!.detail!.count, 1);
    cp.deps.refusals!.flush(true);
    const [repeats, first] = rows();
    assert.deepEqual([repeats!.action, repeats!.outcome, repeats!.target, repeats!.peer], ['run.stop', 'forbidden_origin', 'local/r1', first!.peer]);
    assert.equal(repeats!.detail!.count, 49);
    assert.equal(repeats!.detail!.repeated, true);
    assert.equal((await cp.request('GET', '/v1/audit?verify=true&limit=1')).json.chain.intact, true);
  });
});

describe('hostile traffic: Host header', () => {
  const servers = bothServers();

  for (const server of ['control', 'trigger'] as const) {
    it(`refuses a Host list, junk after an IPv6 literal and a second Host line on the ${server} server`, async () => {
      const port = portOf(server === 'control' ? servers.cp.url : servers.trigger.url);
      for (const host of [`localhost:${port}, evil.example`, '[::1]evil.example', 'localhost:80:81', 'user@localhost']) {
        const c = await openRaw(port);
        c.socket.write(`GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        await c.closed;
        assert.deepEqual(answerOf(c.received()), { status: 400, code: 'bad_request' }, host);
      }
      const twice = await openRaw(port);
      twice.socket.write(`GET /health HTTP/1.1\r\nHost: localhost:${port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
      await twice.closed;
      assert.deepEqual(answerOf(twice.received()), { status: 400, code: 'bad_request' });
    });
  }
});
