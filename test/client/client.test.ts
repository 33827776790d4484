import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createControlClient, ControlApiError } from '../../src/client/client.ts';
import { startStandIn, sendJson, type StandIn } from './stand-in.ts';
import { startTestControl } from '../helpers/control-server.ts';
import { startRedirectPair } from '../helpers/redirect-pair.ts';

let api: StandIn;
before(async () => {
  api = await startStandIn();
});
after(() => api.close());

const ref = { source: 'local', run: 'r01' };

describe('createControlClient requests', () => {
  it('sends the bearer token and passes run filters as query parameters', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { items: [], next_cursor: null });
    const client = createControlClient({ url: `${api.url}/`, token: 's3cret' });
    const page = await client.listRuns({ verdict: 'verified', repo: 'acme/api', limit: 5, cursor: 'abc' });
    assert.deepEqual(page, { items: [], next_cursor: null });
    const seen = api.seen[0]!;
    assert.equal(seen.headers.authorization, 'Bearer s3cret');
    const u = new URL(seen.url, api.url);
    assert.equal(u.pathname, '/v1/runs');
    assert.deepEqual(Object.fromEntries(u.searchParams), { verdict: 'verified', repo: 'acme/api', limit: '5', cursor: 'abc' });
  });

  it('sends no authorization header without a token', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { status: 'ok' });
    await createControlClient({ url: api.url }).health();
    assert.equal(api.seen[0]!.headers.authorization, undefined);
  });

  it('posts JSON bodies for start and answer and encodes path segments', async () => {
    api.seen.length = 0;
    api.answer = (req, res) => sendJson(res, 202, { source: 'local', run: 'r01', echo: req.body });
    const client = createControlClient({ url: api.url });
    await client.start({ brief: 'fix it', repo: '/tmp/x' });
    await client.answer({ source: 'a b', run: 'r/1' }, 'postgres');
    await client.stop(ref);
    assert.equal(api.seen[0]!.method, 'POST');
    assert.equal(api.seen[0]!.url, '/v1/start');
    assert.equal(api.seen[0]!.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(api.seen[0]!.body), { brief: 'fix it', repo: '/tmp/x' });
    assert.equal(api.seen[1]!.url, '/v1/runs/a%20b/r%2F1/answer');
    assert.deepEqual(JSON.parse(api.seen[1]!.body), { answer: 'postgres' });
    assert.equal(api.seen[2]!.url, '/v1/runs/local/r01/stop');
  });

  it('sends If-Match on putConfig when a version is given', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { config: {}, version: 3 });
    await createControlClient({ url: api.url }).putConfig({ a: 1 }, { ifMatch: 2 });
    assert.equal(api.seen[0]!.method, 'PUT');
    assert.equal(api.seen[0]!.headers['if-match'], '2');
  });

  it('returns artifact bytes with content type and etag', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', etag: '"abc"' });
      res.end('hello');
    };
    const art = await createControlClient({ url: api.url }).artifact(ref, 'artifacts/receipt one.json');
    assert.equal(api.seen[0]!.url, '/v1/runs/local/r01/artifact/artifacts/receipt%20one.json');
    assert.equal(new TextDecoder().decode(art.body), 'hello');
    assert.equal(art.etag, '"abc"');
  });
});

describe('createControlClient errors', () => {
  it('throws ControlApiError with status and code from the error envelope', async () => {
    api.answer = (_req, res) => sendJson(res, 409, { error: { code: 'invalid_transition', message: 'Run is not blocked' } });
    const err = await createControlClient({ url: api.url }).answer(ref, 'x').catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError);
    assert.equal(err.status, 409);
    assert.equal(err.code, 'invalid_transition');
    assert.equal(err.message, 'Run is not blocked');
  });

  it('turns a non-envelope error into code http_error', async () => {
    api.answer = (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<h1>bad gateway</h1>');
    };
    const err = await createControlClient({ url: api.url }).health().catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError);
    assert.equal(err.status, 502);
    assert.equal(err.code, 'http_error');
  });

  it('turns a 2xx answer that is not JSON (a proxy page) into ControlApiError code bad_response', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>sign in to the network</html>');
    };
    const err = await createControlClient({ url: api.url }).listRuns().catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError);
    assert.equal(err.status, 200);
    assert.equal(err.code, 'bad_response');
    assert.match(err.message, /answered 200 with something that is not JSON \(text\/html\)/);
  });

  it('reports an answer cut short part way through its body as code bad_response, not a bare TypeError', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"items":');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const err = await createControlClient({ url: api.url }).listRuns().catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError, String(err));
    assert.equal(err.code, 'bad_response');
    assert.equal(err.status, 200);
    assert.match(err.message, /did not send its whole answer/);
  });

  it('reports an unreachable server as status 0 code unreachable without the token', async () => {
    const closed = await startStandIn();
    await closed.close();
    const err = await createControlClient({ url: closed.url, token: 'tok-xyz' }).health().catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError);
    assert.equal(err.code, 'unreachable');
    assert.equal(err.status, 0);
    assert.ok(!err.message.includes('tok-xyz'));
  });
});

// A token goes only to the origin it was made for (DESIGN §7a): a redirect is a failure, never followed with it or the
// body (fetch would drop the token at another port, but send the body again on a 307 or 308).
describe('createControlClient and a redirect', () => {
  for (const status of [307, 308, 302] as const) {
    it(`fails at a ${status} naming it, and sends neither the token nor the batch to where it points`, async () => {
      const pair = await startRedirectPair(status);
      try {
        const client = createControlClient({ url: pair.url, token: 'tok-not-for-there' });
        const started = new Date().toISOString();
        const batch = { source: 'local', runs: [{ run: 'r01', status: 'running', started_at: started }] };
        await assert.rejects(client.ingest(batch as never), (err: unknown) => {
          assert.ok(err instanceof ControlApiError);
          assert.equal(err.status, status);
          assert.equal(err.code, 'redirected');
          assert.match(err.message, new RegExp(`${status}`));
          assert.equal(err.message.includes('tok-not-for-there'), false);
          return true;
        });
        await assert.rejects(client.listRuns(), { status, code: 'redirected' });
        assert.deepEqual(pair.reached, []);
      } finally {
        await pair.close();
      }
    });
  }
});

describe('createControlClient errors from a real Control Plane', () => {
  it('carries the code and the field the server named in Svc-Error-Field for a bad setting', async () => {
    const control = await startTestControl({ token: 'client-field-token' });
    try {
      const client = createControlClient({ url: control.url, token: 'client-field-token' });
      const err = await client.putConfig({ retention_days: 'yes' }).catch((e: unknown) => e);
      assert.ok(err instanceof ControlApiError);
      assert.equal(err.status, 400);
      assert.equal(err.code, 'invalid_param');
      assert.equal(err.field, 'retention_days');
      const unknown = await client.putConfig({ colour: 'blue' }).catch((e: unknown) => e);
      assert.ok(unknown instanceof ControlApiError);
      assert.equal(unknown.field, 'colour');
      const notFound = await client.getRun({ source: 'local', run: 'nope' }).catch((e: unknown) => e);
      assert.ok(notFound instanceof ControlApiError);
      assert.equal(notFound.code, 'not_found');
      assert.equal(notFound.field, null, 'an error about no one field names none');
    } finally {
      await control.close();
    }
  });
});

describe('createControlClient stream', () => {
  it('yields SSE messages with ids and kinds, skipping pings, and resumes with Last-Event-ID', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('retry: 2000\n\n: ping\n\n');
      res.write('id: 7\nevent: log\ndata: {"text":"a"}\n\n');
      res.write('id: 8\r\nevent: run.status\r\ndata: {"from":"running",');
      res.end('"to":"blocked"}\r\n\r\n');
    };
    const client = createControlClient({ url: api.url, token: 't' });
    const got = [];
    for await (const m of client.stream('/v1/stream', { after: 6 })) got.push(m);
    assert.deepEqual(got, [
      { id: '7', event: 'log', data: { text: 'a' } },
      { id: '8', event: 'run.status', data: { from: 'running', to: 'blocked' } },
    ]);
    assert.equal(api.seen[0]!.headers['last-event-id'], '6');
    assert.equal(api.seen[0]!.url, '/v1/stream?after=6');
    assert.equal(api.seen[0]!.headers.authorization, 'Bearer t');
  });

  it('ends quietly when the caller aborts an open stream', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\nevent: log\ndata: "first"\n\n');
    };
    const ac = new AbortController();
    const got = [];
    for await (const m of createControlClient({ url: api.url }).streamRun(ref, { signal: ac.signal })) {
      got.push(m.data);
      ac.abort();
    }
    assert.deepEqual(got, ['first']);
  });

  it('reports a stream cut short as ControlApiError code bad_response after the messages that arrived', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\nevent: log\ndata: "first"\n\n');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const got: unknown[] = [];
    const err = await (async () => {
      for await (const m of createControlClient({ url: api.url }).streamRun(ref)) got.push(m.data);
    })().catch((e: unknown) => e);
    assert.deepEqual(got, ['first']);
    assert.ok(err instanceof ControlApiError, String(err));
    assert.equal(err.code, 'bad_response');
    assert.equal(err.status, 200);
    assert.match(err.message, /did not send its whole answer/);
  });

  it('reports artifact bytes cut short as ControlApiError code bad_response', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
      res.write('hel');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const err = await createControlClient({ url: api.url }).artifact(ref, 'a.txt').catch((e: unknown) => e);
    assert.ok(err instanceof ControlApiError, String(err));
    assert.equal(err.code, 'bad_response');
  });
});

describe('security', () => {
  it('keeps node:sqlite and server code out of src/client', () => {
    const dir = join(import.meta.dirname, '../../src/client');
    for (const name of readdirSync(dir)) {
      const text = readFileSync(join(dir, name), 'utf8');
      assert.ok(!/['"]node:sqlite['"]/.test(text), `${name} imports node:sqlite`);
      for (const m of text.matchAll(/from '(\.[^']+)'/g)) {
        // The ways out: the shared Run JSON types and the /proc reader, leaves that import no server code.
        const leaf = m[1] === '../run-json.ts' || m[1] === '../proc-stat.ts';
        assert.ok(m[1]!.startsWith('./') || leaf, `${name} imports ${m[1]} outside src/client`);
      }
    }
    // run-json.ts may import the typed readers, they the JSON value's leaf, and it nothing: no path from the client
    // reaches server code.
    const importsOf = (file: string) => [...readFileSync(join(dir, '..', file), 'utf8')
      .matchAll(/^\s*(?:import|export .* from)\b.*?['"]([^'"]+)['"]/gm)].map((m) => m[1]);
    assert.deepEqual(importsOf('run-json.ts'), ['./untrusted.ts']);
    assert.deepEqual(importsOf('untrusted.ts'), ['./json-value.ts']);
    assert.deepEqual(importsOf('json-value.ts'), []);
    assert.deepEqual(importsOf('proc-stat.ts'), ['node:fs']);
  });
});
