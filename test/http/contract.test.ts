// The error-envelope contract (DESIGN §4, STYLE habit 8): every error path of the Control Plane answers exactly
// {"error":{"code","message"}} with the right status, JSON content type, no-store and nosniff; an error about one
// request field (a setting) also names it in the Svc-Error-Field header (the body stays exact), and no other does.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { rawRequest, type RawOptions, type RawResponse } from '../helpers/raw-http.ts';

const TOKEN = 'contract-token-0123456789';
const MiB = 1024 * 1024;

type Server = 'plain' | 'token' | 'public';

interface Case {
  name: string;
  server?: Server;
  method?: string;
  path: string;
  opts?: RawOptions;
  status: number;
  code: string | string[];
  header?: [string, RegExp];
  /** The request field the Svc-Error-Field header names; absent: no such header. */
  field?: string;
}

const json = (body: unknown, extra: Record<string, string> = {}): RawOptions => ({
  body: typeof body === 'string' ? body : JSON.stringify(body),
  headers: { 'content-type': 'application/json', ...extra },
});

const CASES: Case[] = [
  { name: 'a malformed percent escape in the path', path: '/v1/runs/local/%E0%A4%A', status: 400, code: 'bad_request' },
  { name: 'a config body that is not an object', method: 'PUT', path: '/v1/config', opts: json('[1]'), status: 400, code: 'bad_request' },
  { name: 'malformed JSON', method: 'PUT', path: '/v1/config', opts: json('{"retention_days":'), status: 400, code: 'invalid_json' },
  { name: 'an empty JSON body', method: 'PUT', path: '/v1/config', opts: json(''), status: 400, code: 'invalid_json' },
  { name: 'a bad limit', path: '/v1/runs?limit=0', status: 400, code: 'invalid_param' },
  { name: 'a forged runs cursor', path: '/v1/runs?cursor=not-a-cursor', status: 400, code: 'invalid_param' },
  { name: 'a bad since on stats', path: '/v1/stats?since=tuesday', status: 400, code: 'invalid_param' },
  {
    name: 'an unknown config key', method: 'PUT', path: '/v1/config', opts: json({ colour: 1 }), status: 400,
    code: 'invalid_param', field: 'colour',
  },
  {
    name: 'a config value of the wrong type', method: 'PUT', path: '/v1/config', opts: json({ retention_days: 'x' }),
    status: 400, code: 'invalid_param', field: 'retention_days',
  },
  { name: 'a bad run segment', path: '/v1/runs/local/..bad', status: 400, code: 'invalid_param' },
  { name: 'a missing token', server: 'token', path: '/v1/runs', status: 401, code: 'unauthorized', header: ['www-authenticate', /^Bearer/] },
  {
    name: 'a wrong token',
    server: 'token',
    path: '/v1/stats',
    opts: { headers: { authorization: 'Bearer nope' } },
    status: 401,
    code: 'unauthorized',
    header: ['www-authenticate', /^Bearer/],
  },
  { name: 'a loopback-only route on a public bind', server: 'public', method: 'PUT', path: '/v1/config', opts: json({}), status: 403, code: 'loopback_only' },
  { name: 'a foreign Host header', path: '/v1/runs', opts: { headers: { host: 'evil.example:80' } }, status: 403, code: 'forbidden_host' },
  {
    name: 'a foreign Origin on a mutation',
    method: 'PUT',
    path: '/v1/config',
    opts: json({}, { origin: 'https://evil.example' }),
    status: 403,
    code: 'forbidden_origin',
  },
  { name: 'an unknown route', path: '/v1/nothing-here', status: 404, code: 'not_found' },
  { name: 'an unknown run', path: '/v1/runs/local/r-unknown', status: 404, code: 'not_found' },
  { name: 'a method the path does not take', method: 'DELETE', path: '/v1/config', status: 405, code: 'method_not_allowed', header: ['allow', /GET, .*PUT|PUT, .*GET/] },
  { name: 'a lost config update', method: 'PUT', path: '/v1/config', opts: json({}, { 'if-match': '999' }), status: 409, code: 'conflict' },
  { name: 'deleting an active run', method: 'DELETE', path: '/v1/runs/local/r000001', status: 409, code: ['invalid_transition', 'conflict'] },
  {
    name: 'a declared body over 1 MiB',
    method: 'PUT',
    path: '/v1/config',
    opts: { body: Buffer.alloc(MiB + 1, 0x20), headers: { 'content-type': 'application/json' } },
    status: 413,
    code: 'payload_too_large',
  },
  { name: 'a non-JSON content type', method: 'PUT', path: '/v1/config', opts: { body: 'a=1', headers: { 'content-type': 'text/plain' } }, status: 415, code: 'unsupported_media_type' },
];

function assertEnvelope(res: RawResponse, status: number, code: string | string[], label: string, field?: string): void {
  assert.equal(res.status, status, `${label}: ${res.text}`);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8', label);
  assert.equal(res.headers['cache-control'], 'no-store', label);
  assert.equal(res.headers['x-content-type-options'], 'nosniff', label);
  assert.ok(res.json && typeof res.json === 'object', `${label}: body is JSON`);
  assert.deepEqual(Object.keys(res.json), ['error'], label);
  assert.deepEqual(Object.keys(res.json.error), ['code', 'message'], label);
  assert.equal(res.headers['svc-error-field'], field, label);
  assert.equal(typeof res.json.error.message, 'string', label);
  assert.ok(res.json.error.message.length > 0, label);
  assert.ok((Array.isArray(code) ? code : [code]).includes(res.json.error.code), `${label}: code ${res.json.error.code}`);
  assert.match(res.json.error.code, /^[a-z]+(_[a-z]+)*$/, label);
}

describe('error envelope contract', () => {
  const servers = {} as Record<Server, TestControl>;
  before(async () => {
    servers.plain = await startTestControl();
    servers.token = await startTestControl({ token: TOKEN });
    servers.public = await startTestControl({ token: TOKEN, host: '0.0.0.0' });
    servers.plain.deps.stores.runs.upsert('local', makeRun(1, { status: 'running' }));
  });
  after(async () => {
    await Promise.all(Object.values(servers).map((s) => s.close()));
  });

  for (const c of CASES) {
    it(`answers ${c.status} ${Array.isArray(c.code) ? c.code.join('|') : c.code} to ${c.name}`, async () => {
      const server = servers[c.server ?? 'plain'];
      const headers: Record<string, string> = { ...c.opts?.headers };
      // The public server is reached through loopback; with a token so only the guard under test refuses.
      if (c.server === 'public') headers.authorization ??= `Bearer ${TOKEN}`;
      const res = await rawRequest(server.url, c.path, {
        ...c.opts,
        method: c.method ?? 'GET',
        headers,
        ...(c.server === 'public' ? { connectHost: '127.0.0.1' } : {}),
      });
      assertEnvelope(res, c.status, c.code, c.name, c.field);
      if (c.header) assert.match(String(res.headers[c.header[0]] ?? ''), c.header[1], `${c.name}: ${c.header[0]}`);
    });
  }

  it('answers 413 to a chunked body with no Content-Length once it passes 1 MiB', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const res = await rawRequest(servers.plain.url, '/v1/config', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      chunks: Array.from({ length: 20 }, () => chunk),
    });
    assertEnvelope(res, 413, 'payload_too_large', 'chunked');
  });

  it('answers HEAD on an unknown route with the 404 status and no body', async () => {
    const res = await rawRequest(servers.plain.url, '/v1/nothing-here', { method: 'HEAD' });
    assert.equal(res.status, 404);
    assert.equal(res.text, '');
  });
});

describe('error envelope contract: failures inside the server', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(async () => {
    // The test closed the database itself, so the second close inside shutdown throws; the server is down by then.
    await control.close().catch(() => {});
    rmSync(control.dir, { recursive: true, force: true });
  });

  it('answers 503 unavailable from /ready and 500 internal_error elsewhere once the database is gone, leaking nothing', async () => {
    control.deps.db.close();
    const ready = await rawRequest(control.url, '/ready');
    assertEnvelope(ready, 503, 'unavailable', '/ready');
    // A run detail reads the main connection (stats read on their own thread's connection, expensive-reads.ts).
    const res = await rawRequest(control.url, '/v1/runs/local/SECRET-INPUT-42');
    assertEnvelope(res, 500, 'internal_error', 'run detail');
    assert.equal(res.text.includes('SECRET-INPUT-42'), false);
    assert.doesNotMatch(res.text, /database|sqlite|\bat \w+ \(|\.ts:\d+/i);
  });
});
