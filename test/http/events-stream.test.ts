import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { openSseClient, type SseClient } from '../helpers/sse-client.ts';

const T0 = '2026-01-01T00:00:00.000Z';

function runJson(run: string): Record<string, unknown> {
  return { run, status: 'running', started_at: T0, updated_at: T0 };
}

function logs(run: string, from: number, count: number): Array<Record<string, unknown>> {
  return Array.from({ length: count }, (_, i) => ({ run, seq: from + i, ts: T0, kind: 'log', data: { stream: 'stdout', text: `line ${from + i}` } }));
}

async function ingest(cp: TestControl, body: Record<string, unknown>): Promise<void> {
  const res = await cp.request('POST', '/v1/ingest', { body: { source: 'local', ...body } });
  assert.equal(res.status, 200, res.text);
}

function ids(c: SseClient): number[] {
  return c.events().map((f) => Number(f.id));
}

describe('GET /v1/runs/:source/:run/events', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    await ingest(cp, { runs: [runJson('ra')], events: logs('ra', 1, 7) });
  });
  after(() => cp.close());

  it('lists events ascending with the DESIGN §3 event shape', async () => {
    const res = await cp.request('GET', '/v1/runs/local/ra/events');
    assert.equal(res.status, 200);
    assert.equal(res.json.items.length, 7);
    assert.equal(res.json.next_cursor, null);
    const ev = res.json.items[0];
    assert.deepEqual(Object.keys(ev), ['id', 'source', 'run', 'seq', 'ts', 'kind', 'data']);
    assert.deepEqual(ev.data, { stream: 'stdout', text: 'line 1' });
    assert.equal(ev.ts, T0);
  });

  it('pages with limit and next_cursor, and resumes with after', async () => {
    const first = await cp.request('GET', '/v1/runs/local/ra/events?limit=3');
    assert.equal(first.json.items.length, 3);
    const second = await cp.request('GET', `/v1/runs/local/ra/events?limit=3&cursor=${first.json.next_cursor}`);
    assert.deepEqual(second.json.items.map((e: { seq: number }) => e.seq), [4, 5, 6]);
    const after = await cp.request('GET', `/v1/runs/local/ra/events?after=${second.json.items[2].id}`);
    assert.deepEqual(after.json.items.map((e: { seq: number }) => e.seq), [7]);
  });

  it('answers 404 for an unknown run and 400 for a bad after, or for after and cursor both', async () => {
    assert.equal((await cp.request('GET', '/v1/runs/local/nope/events')).status, 404);
    const bad = await cp.request('GET', '/v1/runs/local/ra/events?after=-1');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'invalid_param');
    const both = await cp.request('GET', '/v1/runs/local/ra/events?after=1&cursor=2');
    assert.equal(both.status, 400);
    assert.equal(both.json.error.message, 'Give "after" or "cursor", not both');
  });
});

describe('GET /v1/runs/:source/:run/stream', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    await ingest(cp, { runs: [runJson('rs'), runJson('other')], events: [...logs('rs', 1, 5), ...logs('other', 1, 2)] });
  });
  after(() => cp.close());

  it('replays the run history then delivers live events with id and event lines', async () => {
    const c = await openSseClient(`${cp.url}/v1/runs/local/rs/stream`);
    assert.equal(c.status, 200);
    assert.match(c.headers.get('content-type') ?? '', /^text\/event-stream/);
    await c.waitFor((x) => x.events().length === 5);
    await ingest(cp, { events: [...logs('rs', 6, 2), ...logs('other', 3, 1)] });
    await c.waitFor((x) => x.events().length === 7);
    const frames = c.events();
    assert.deepEqual(frames.map((f) => JSON.parse(f.data!).seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.ok(frames.every((f) => f.event === 'log' && JSON.parse(f.data!).id === Number(f.id) && JSON.parse(f.data!).run === 'rs'));
    c.close();
  });

  it('resumes after Last-Event-ID without repeating what was sent', async () => {
    const all = (await cp.request('GET', '/v1/runs/local/rs/events')).json.items as Array<{ id: number }>;
    const c = await openSseClient(`${cp.url}/v1/runs/local/rs/stream?after=0`, { 'last-event-id': String(all[4]!.id) });
    await c.waitFor((x) => x.events().length === 2);
    assert.deepEqual(ids(c), [all[5]!.id, all[6]!.id]);
    c.close();
  });

  it('loses and repeats nothing when events arrive while a long history is replayed', async () => {
    // 20 MB of history: more than loopback socket buffers hold, so with the client not reading yet the replay has to
    // wait for the socket to drain, and the live events below are committed and published mid-replay.
    await ingest(cp, { runs: [runJson('busy')] });
    const history = 20_000;
    const pad = 'x'.repeat(1000);
    for (let from = 1; from <= history; from += 500) {
      await ingest(cp, { events: logs('busy', from, 500).map((e) => ({ ...e, data: { text: pad } })) });
    }
    const subscribers = cp.deps.bus.size();
    const c = await openSseClient(`${cp.url}/v1/runs/local/busy/stream`, {}, { paused: true });
    while (cp.deps.bus.size() === subscribers) await new Promise((r) => setImmediate(r));
    let next = history + 1;
    for (let b = 0; b < 5; b++) {
      await ingest(cp, { events: logs('busy', next, 20) });
      next += 20;
    }
    c.resume();
    const total = next - 1;
    // Wait for the newest event rather than a count, so a lost event fails the assertion below instead of timing out.
    await c.waitFor((x) => {
      const last = x.frames[x.frames.length - 1];
      return last?.data !== undefined && JSON.parse(last.data).seq === total;
    }, 60_000);
    const seqs = c.events().map((f) => JSON.parse(f.data!).seq);
    assert.equal(seqs.length, total);
    assert.ok(seqs.every((s, i) => s === i + 1), 'every event once, in order');
    c.close();
  });

  it('answers 404 for an unknown run and 400 for a bad Last-Event-ID', async () => {
    assert.equal((await cp.request('GET', '/v1/runs/local/nope/stream')).status, 404);
    const res = await cp.request('GET', '/v1/runs/local/rs/stream', { headers: { 'last-event-id': 'abc' } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
  });
});

describe('GET /v1/stream', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
    await ingest(cp, { runs: [runJson('x1'), runJson('x2')], events: logs('x1', 1, 3) });
  });
  after(() => cp.close());

  it('starts live by default and carries events of every run', async () => {
    const c = await openSseClient(`${cp.url}/v1/stream`);
    await c.waitFor((x) => x.frames.length >= 1);
    await ingest(cp, { events: [...logs('x1', 4, 1), ...logs('x2', 1, 1)] });
    await c.waitFor((x) => x.events().length === 2);
    assert.deepEqual(c.events().map((f) => JSON.parse(f.data!).run), ['x1', 'x2']);
    c.close();
  });

  it('replays from ?after= and filters by source and run', async () => {
    const c = await openSseClient(`${cp.url}/v1/stream?after=0&source=local&run=x2`);
    await c.waitFor((x) => x.events().length === 1);
    assert.equal(JSON.parse(c.events()[0]!.data!).run, 'x2');
    c.close();
    const all = await openSseClient(`${cp.url}/v1/stream?after=0`);
    await all.waitFor((x) => x.events().length === 5);
    all.close();
  });

  it('rejects run without source and unknown parameters', async () => {
    assert.equal((await cp.request('GET', '/v1/stream?run=x1')).status, 400);
    assert.equal((await cp.request('GET', '/v1/stream?foo=1')).status, 400);
  });

  it('ends open streams cleanly when the server shuts down', async () => {
    const other = await startTestControl();
    const c = await openSseClient(`${other.url}/v1/stream`);
    await c.waitFor((x) => x.frames.length >= 1);
    assert.equal(other.deps.bus.size(), 1);
    await other.close();
    await c.ended;
    assert.equal(other.deps.bus.size(), 0);
  });
});

describe('security', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'stream-token' });
  });
  after(() => cp.close());

  it('needs the bearer token for streams and event lists', async () => {
    assert.equal((await cp.request('GET', '/v1/stream', { token: null })).status, 401);
    assert.equal((await cp.request('GET', '/v1/runs/local/x/events', { token: null })).status, 401);
  });
});
