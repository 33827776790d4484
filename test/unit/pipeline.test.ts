// The request pipeline on a real node:http server: synchronous and asynchronous handlers, errors thrown either way,
// HEAD, a handler that takes the response over, body routes and the refusal hook. A handler that answers at once is
// written from the request callback itself (no promise in between); every path must still answer exactly once, in
// the error envelope when it fails.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPipeline, type Refusal, type Route } from '../../src/http/pipeline.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { TAKEN_OVER } from '../../src/http/respond.ts';
import { createLogger } from '../../src/log.ts';
import { BadInputError, ConflictError, FailedError, NotFoundError } from '../../src/errors.ts';

type Deps = { calls: string[] };

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const routes: Array<Route<Deps>> = [
  { method: 'GET', pattern: '/sync', handler: () => ({ status: 200, body: { ok: 'sync' } }), auth: false },
  { method: 'GET', pattern: '/async', handler: async () => ({ status: 200, body: { ok: 'async' } }), auth: false },
  {
    // A thenable that is not a native Promise (a handler built on another promise library) is awaited too.
    method: 'GET', pattern: '/thenable', auth: false,
    handler: () => ({ then: (done: (r: unknown) => void) => done({ status: 200, body: { ok: 'thenable' } }) }) as never,
  },
  {
    method: 'GET', pattern: '/sync-refusal', auth: false,
    handler: () => {
      throw new HttpError('invalid_param', 'Parameter "x" is wrong');
    },
  },
  {
    method: 'GET', pattern: '/typed/:kind', auth: false,
    handler: async (ctx) => {
      if (ctx.params.kind === 'input') throw new BadInputError('The brief is empty');
      if (ctx.params.kind === 'missing') throw new NotFoundError('No run r1');
      if (ctx.params.kind === 'conflict') throw new ConflictError('The run already ended');
      throw new FailedError('git exited 128: secret detail that must not leak');
    },
  },
  {
    method: 'GET', pattern: '/sync-crash', auth: false,
    handler: () => {
      throw new Error('secret detail that must not leak');
    },
  },
  {
    method: 'GET', pattern: '/async-crash', auth: false,
    handler: async () => {
      throw new Error('secret detail that must not leak');
    },
  },
  {
    // An error carrying a header Node refuses to write (a newline in it): still answered, without that header.
    method: 'GET', pattern: '/bad-header-refusal', auth: false,
    handler: () => {
      throw new HttpError('invalid_param', 'Parameter "x" is wrong', { 'svc-error-field': 'x\ny' });
    },
  },
  {
    method: 'GET', pattern: '/taken', auth: false,
    handler: (ctx) => {
      ctx.res.writeHead(200, { 'content-type': 'text/plain' });
      ctx.res.end('streamed by the handler');
      return TAKEN_OVER;
    },
  },
  { method: 'GET', pattern: '/strict', auth: false, query: ['limit'], handler: () => ({ status: 200, body: {} }) },
  { method: 'GET', pattern: '/items/:id', auth: false, handler: (c) => ({ status: 200, body: { id: c.params.id } }) },
  { method: 'GET', pattern: '/items/latest', auth: false, handler: () => ({ status: 200, body: { id: 'literal' } }) },
  {
    method: 'POST', pattern: '/echo', body: 'json', auth: false,
    handler: (ctx) => {
      ctx.deps.calls.push('echo');
      return { status: 201, body: { got: ctx.body } };
    },
  },
  {
    method: 'POST', pattern: '/echo-fails', body: 'json', auth: false,
    handler: () => {
      throw new HttpError('conflict', 'Already there');
    },
  },
];

function ask(
  base: string, method: string, path: string, body?: string, headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function envelope(answer: Answer): { code: string; message: string } {
  return (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
}

describe('request pipeline', () => {
  let server: Server;
  let base = '';
  const deps: Deps = { calls: [] };
  const refusals: Array<Refusal<Deps>> = [];
  const logged: string[] = [];

  before(async () => {
    const listener = createPipeline<Deps>({
      routes,
      deps,
      boundToLoopback: true,
      log: createLogger('pipeline-test', (line) => void logged.push(line)),
      onRefused: (info) => {
        refusals.push(info);
        if (info.req.headers['x-hook-fails'] !== undefined) throw new Error('the audit store is gone');
      },
    });
    server = createServer(listener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('answers a synchronous and an asynchronous handler alike, with the JSON headers', async () => {
    for (const [path, ok] of [['/sync', 'sync'], ['/async', 'async'], ['/thenable', 'thenable']] as const) {
      const answer = await ask(base, 'GET', path);
      assert.equal(answer.status, 200);
      assert.deepEqual(JSON.parse(answer.body), { ok });
      assert.equal(answer.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(answer.headers['x-content-type-options'], 'nosniff');
      assert.equal(answer.headers['content-length'], String(Buffer.byteLength(answer.body)));
    }
  });

  it("refuses a query parameter its route's row does not name, or one given twice, as 400 invalid_param", async () => {
    assert.equal((await ask(base, 'GET', '/strict?limit=1')).status, 200);
    for (const query of ['limt=1', 'limit=1&limit=2']) {
      const answer = await ask(base, 'GET', `/strict?${query}`);
      assert.equal(answer.status, 400, query);
      assert.equal(envelope(answer).code, 'invalid_param');
    }
    // A route whose row names no query list checks none.
    assert.equal((await ask(base, 'GET', '/sync?anything=1')).status, 200);
  });

  it('answers HEAD with the headers of GET and no body', async () => {
    const answer = await ask(base, 'HEAD', '/sync');
    assert.equal(answer.status, 200);
    assert.equal(answer.body, '');
    assert.equal(answer.headers['content-length'], String(Buffer.byteLength(JSON.stringify({ ok: 'sync' }))));
  });

  it('turns an HttpError thrown synchronously into its envelope', async () => {
    const answer = await ask(base, 'GET', '/sync-refusal');
    assert.equal(answer.status, 400);
    assert.deepEqual(envelope(answer), { code: 'invalid_param', message: 'Parameter "x" is wrong' });
  });

  it('answers an HttpError whose header cannot be written, with its status and envelope', async () => {
    const answer = await ask(base, 'GET', '/bad-header-refusal');
    assert.equal(answer.status, 400);
    assert.deepEqual(envelope(answer), { code: 'invalid_param', message: 'Parameter "x" is wrong' });
  });

  it('answers a typed svc error a handler let escape with its own status and message, never a 500', async () => {
    const expected = [['input', 400, 'bad_request', 'The brief is empty'], ['missing', 404, 'not_found', 'No run r1'],
      ['conflict', 409, 'conflict', 'The run already ended']] as const;
    for (const [kind, status, code, message] of expected) {
      const answer = await ask(base, 'GET', `/typed/${kind}`);
      assert.equal(answer.status, status, kind);
      assert.deepEqual(envelope(answer), { code, message });
    }
    const failed = await ask(base, 'GET', '/typed/failed');
    assert.equal(failed.status, 500, 'a failure of something svc ran stays a server error');
    assert.ok(!failed.body.includes('secret detail'), failed.body);
  });

  it('answers 500 internal_error, without the detail, for a crash thrown either way, and logs it', async () => {
    for (const path of ['/sync-crash', '/async-crash']) {
      const before = logged.length;
      const answer = await ask(base, 'GET', path);
      assert.equal(answer.status, 500);
      const error = envelope(answer);
      assert.equal(error.code, 'internal_error');
      assert.ok(!answer.body.includes('secret detail'), answer.body);
      assert.equal(logged.length, before + 1);
      assert.match(logged[before]!, /unhandled error/);
    }
  });

  it('leaves the response to a handler that took it over', async () => {
    const answer = await ask(base, 'GET', '/taken');
    assert.equal(answer.status, 200);
    assert.equal(answer.body, 'streamed by the handler');
  });

  it('prefers the literal route over a parameter, and answers 405 with Allow on an exact path', async () => {
    assert.deepEqual(JSON.parse((await ask(base, 'GET', '/items/latest')).body), { id: 'literal' });
    assert.deepEqual(JSON.parse((await ask(base, 'GET', '/items/other')).body), { id: 'other' });
    const wrong = await ask(base, 'DELETE', '/sync');
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, 'GET, HEAD');
    // One trailing slash is the path without it (README, Trigger server API); two are no route.
    assert.equal((await ask(base, 'GET', '/sync/')).status, 200);
    assert.equal((await ask(base, 'GET', '/sync//')).status, 404);
  });

  it('reads a JSON body before the handler and refuses a bad one, told to the refusal hook', async () => {
    const json = { 'content-type': 'application/json' };
    const ok = await ask(base, 'POST', '/echo', '{"a":1}', json);
    assert.equal(ok.status, 201);
    assert.deepEqual(JSON.parse(ok.body), { got: { a: 1 } });

    const count = refusals.length;
    const calls = deps.calls.length;
    const malformed = await ask(base, 'POST', '/echo', '{"a":', json);
    assert.equal(malformed.status, 400);
    assert.equal(envelope(malformed).code, 'invalid_json');
    const wrongType = await ask(base, 'POST', '/echo', '{"a":1}', { 'content-type': 'text/plain' });
    assert.equal(wrongType.status, 415);
    assert.deepEqual(refusals.slice(count).map((r) => r.error.code), ['invalid_json', 'unsupported_media_type']);
    assert.equal(deps.calls.length, calls, 'the handler never ran for a refused body');
  });

  it('answers a refusal whose hook throws all the same, and logs the hook\'s failure', async () => {
    const answer = await ask(base, 'POST', '/echo', '{}', { 'content-type': 'text/plain', 'x-hook-fails': '1' });
    assert.equal(answer.status, 415);
    assert.equal(envelope(answer).code, 'unsupported_media_type');
    assert.ok(logged.some((line) => line.includes('refusal hook failed') && line.includes('the audit store is gone')));
  });

  it('does not report a handler\'s own error as a refusal', async () => {
    const count = refusals.length;
    const answer = await ask(base, 'POST', '/echo-fails', '{}', { 'content-type': 'application/json' });
    assert.equal(answer.status, 409);
    assert.equal(envelope(answer).code, 'conflict');
    assert.equal(refusals.length, count);
  });

  it('keeps serving after every kind of failure', async () => {
    const paths = ['/sync-crash', '/sync-refusal', '/async-crash', '/sync'];
    const statuses = [];
    for (const path of paths) statuses.push((await ask(base, 'GET', path)).status);
    assert.deepEqual(statuses, [500, 400, 500, 200]);
  });
});

