import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { controlRoutes } from '../../src/control/app.ts';
import { triggerRoutes } from '../../src/trigger/app.ts';
import { buildOpenapi, toOpenapiPath, CONTROL_SERVER, QUERIES, TRIGGER_SERVER } from '../../src/control/openapi.ts';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { checkResponse, findOperation, validate } from '../helpers/openapi-check.ts';
import { startTestTrigger, type TestTrigger } from '../trigger/helpers.ts';
import { makeRepo, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { OWN, sign } from '../trigger/helpers.ts';

type Doc = { paths: Record<string, Record<string, any>>; servers: Array<{ url: string }>; components: Record<string, Record<string, unknown>> };
const doc = buildOpenapi('0.0.0-test', controlRoutes) as unknown as Doc;
const METHODS = ['get', 'post', 'put', 'delete', 'patch'];

/** `METHOD /path` for every documented operation served by `server` (operation, then path item, then root servers). */
function documented(server: { url: string }): Set<string> {
  const out = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const servers: Array<{ url: string }> = op.servers ?? item.servers ?? doc.servers;
      if (servers.some((s) => s.url === server.url)) out.add(`${method.toUpperCase()} ${path}`);
    }
  }
  return out;
}

function routeKeys(routes: ReadonlyArray<{ method: string; pattern: string }>): Set<string> {
  return new Set(routes.map((r) => `${r.method} ${toOpenapiPath(r.pattern)}`));
}

function assertSameRoutes(actual: Set<string>, docs: Set<string>): void {
  const undocumented = [...actual].filter((k) => !docs.has(k));
  const phantom = [...docs].filter((k) => !actual.has(k));
  assert.deepEqual(undocumented, [], `routes without documentation: ${undocumented.join(', ')}`);
  assert.deepEqual(phantom, [], `documentation without a route: ${phantom.join(', ')}`);
}

describe('OpenAPI document', () => {
  it('documents every Control Plane route and nothing the Control Plane does not serve', () => {
    assertSameRoutes(routeKeys(controlRoutes), documented(CONTROL_SERVER));
  });

  it('documents every trigger server route and nothing the trigger server does not serve', () => {
    assertSameRoutes(routeKeys(triggerRoutes), documented(TRIGGER_SERVER));
  });

  it('is OpenAPI 3.1 with unique operation ids and no dangling $ref', () => {
    assert.equal((doc as unknown as { openapi: string }).openapi, '3.1.0');
    const ids = Object.values(doc.paths).flatMap((item) => METHODS.map((m) => item[m]?.operationId).filter(Boolean));
    assert.equal(new Set(ids).size, ids.length);
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/(\w+)\/(\w+)"/g)];
    assert.ok(refs.length > 0);
    for (const [, kind, name] of refs) assert.ok(doc.components[kind!]?.[name!], `dangling $ref ${kind}/${name}`);
  });

  it('describes GET /v1/providers as the bare array of providers DESIGN §4 names', () => {
    const schema = doc.paths['/v1/providers']!.get.responses['200'].content['application/json'].schema;
    const list = doc.components.schemas!.ProviderList as { type: string; items: { $ref: string } };
    assert.equal(schema.$ref, '#/components/schemas/ProviderList');
    assert.equal(list.type, 'array');
    assert.equal(list.items.$ref, '#/components/schemas/Provider');
  });

  it('gives every GET /v1 route the query list its operation documents, which the pipeline holds requests to', () => {
    const strict = controlRoutes.filter((r) => r.method === 'GET' && r.pattern.startsWith('/v1/'));
    assert.ok(strict.length > 15);
    for (const r of strict) {
      const documented = doc.paths[toOpenapiPath(r.pattern)]!.get.parameters
        .filter((p: { in: string }) => p.in === 'query').map((p: { name: string }) => p.name);
      assert.deepEqual([...(r.query ?? ['no list'])].sort(), documented.sort(), r.pattern);
    }
    assert.ok(controlRoutes.find((r) => r.pattern === '/v1/runs' && r.method === 'GET')?.query?.includes('status'));
  });

  it('takes each documented query list for an operation a Control Plane route has', () => {
    const ids = new Set(controlRoutes.map((r) => r.doc.id));
    assert.deepEqual(Object.keys(QUERIES).filter((id) => !ids.has(id)), []);
  });

  it('declares every path parameter of each path', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const method of METHODS) {
        if (!item[method]) continue;
        const declared = item[method].parameters.filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name);
        assert.deepEqual(declared, names, `${method} ${path}`);
      }
    }
  });
});

describe('GET /v1/openapi.json', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'tok-openapi' });
  });
  after(() => cp.close());

  it('serves the document with this server first in servers', async () => {
    const res = await cp.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.equal(res.json.openapi, '3.1.0');
    assert.equal(res.json.servers[0].url, cp.url);
    assert.ok(res.json.paths['/v1/runs'].get);
  });

  describe('security', () => {
    it('needs the bearer token like every /v1 route', async () => {
      const res = await cp.request('GET', '/v1/openapi.json', { token: null });
      assert.equal(res.status, 401);
      assert.equal(res.json.error.code, 'unauthorized');
    });
  });
});

// Issue 23: every route of both route tables answers something, and each answer is checked against the document.
// A request per route (some routes several); the first test proves the table misses no route.
interface Probe {
  server: 'control' | 'trigger';
  method: string;
  path: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  status: number;
}

const GH = 'github-secret-6';
const API = 'api-token-7';

function hubSigned(raw: string, event: string, delivery: string): Record<string, string> {
  return { 'x-hub-signature-256': `sha256=${sign.hex(GH, Buffer.from(raw))}`, 'x-github-event': event, 'x-github-delivery': delivery };
}

const LABELLED = JSON.stringify({ action: 'labeled', label: { name: 'svc' }, issue: { number: 3, title: 'Crash', body: 'on save', ...OWN }, sender: OWN.user, repository: { full_name: 'acme/api' } });
const RUN_PATH = '/v1/runs/local/r000001';
/** The `_meta` every MCP 2026-07-28 request carries (test/http/mcp-2026.test.ts covers that revision). */
const MCP_2026_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {},
};

function probes(repo: string): Probe[] {
  const c = (method: string, path: string, status: number, body?: unknown, headers: Record<string, string> = {}): Probe => ({
    server: 'control', method, path, status, headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const t = (method: string, path: string, status: number, body?: string, headers: Record<string, string> = {}): Probe => ({
    server: 'trigger', method, path, status, headers, ...(body === undefined ? {} : { body }),
  });
  return [
    c('GET', '/health', 200), c('GET', '/ready', 200), c('GET', '/v1/openapi.json', 200),
    c('GET', '/v1/runs?verdict=verified&status=succeeded&limit=5', 200), c('GET', '/v1/runs?limit=0', 400),
    c('POST', '/v1/runs', 400, { brief: 'x', repo: '/nowhere/unregistered' }),
    c('POST', '/v1/start', 202, { brief: 'contract', repo, provider: 'fake', request_id: 'contract-1' }),
    c('POST', '/v1/start', 200, { brief: 'contract', repo, provider: 'fake', request_id: 'contract-1' }),
    c('GET', RUN_PATH, 200), c('GET', '/v1/runs/local/r-none', 404),
    c('DELETE', '/v1/runs/local/r000002', 200), c('DELETE', '/v1/runs/local/r000003', 409),
    c('POST', `${RUN_PATH}/stop`, 409, {}), c('POST', '/v1/runs/local/r000003/stop', 202),
    c('POST', `${RUN_PATH}/resume`, 409, {}), c('POST', `${RUN_PATH}/retry`, 409),
    c('POST', `${RUN_PATH}/verify`, 409, {}), c('POST', `${RUN_PATH}/answer`, 409, { answer: 'yes' }),
    c('POST', `${RUN_PATH}/pr`, 409, {}),
    c('GET', `${RUN_PATH}/events?limit=10`, 200), c('GET', `${RUN_PATH}/stream`, 200), c('GET', '/v1/stream?after=0', 200), c('GET', `${RUN_PATH}/artifact/diffstat.json`, 200),
    c('GET', `${RUN_PATH}/artifact/missing.txt`, 404),
    c('GET', `/v1/stream?after=0&source=local&run=r000001`, 200),
    c('GET', '/v1/stats', 200), c('GET', '/v1/stats/cost', 200), c('GET', '/v1/audit?verify=true', 200),
    c('GET', '/v1/config', 200), c('PUT', '/v1/config', 200, { retention_days: 30 }), c('PUT', '/v1/config', 409, {}, { 'if-match': '999' }),
    c('GET', '/v1/providers', 200), c('GET', '/v1/integrations', 200), c('GET', '/v1/notifications', 200),
    c('GET', '/v1/merge/queue', 200), c('POST', '/v1/merge/queue', 404, { source: 'local', run: 'r-none' }),
    c('POST', '/v1/merge/run', 200), c('GET', `/v1/review/risk?source=local&run=r000001`, 200),
    c('POST', '/mcp', 200, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } }),
    c('POST', '/mcp', 404, { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': 'ended' }),
    c('POST', '/mcp', 200, { jsonrpc: '2.0', id: 3, method: 'server/discover', params: { _meta: MCP_2026_META } },
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' }),
    c('DELETE', '/mcp', 400),
    c('GET', '/v1/keys', 200), c('GET', '/v1/repos', 200), c('GET', '/v1/projects', 200),
    c('POST', '/v1/ingest', 200, { source: 'far', runs: [{ run: 'rf1', status: 'running', started_at: '2026-01-01T00:00:00Z' }] }),
    c('POST', '/v1/import', 200, { path: repo }), c('POST', '/v1/import', 400, { path: 'relative' }),
    c('GET', '/v1/runs', 401, undefined, { authorization: 'Bearer wrong' }),
    c('GET', '/metrics', 200), c('GET', '/metrics', 401, undefined, { authorization: 'Bearer wrong' }),
    t('GET', '/metrics', 200, undefined, { authorization: `Bearer ${API}` }), t('GET', '/metrics', 401),
    t('GET', '/health', 200), t('GET', '/ready', 200), t('GET', '/status', 200),
    t('POST', '/errtrack', 401, '{}'), t('POST', '/chata', 401, 'a=1', { 'content-type': 'application/x-www-form-urlencoded' }),
    t('POST', '/trackera', 401, '{}'), t('POST', '/trackerb', 401, '{}'), t('POST', '/chatb', 401, '{}'),
    t('POST', '/webhook', 200, '{"zen":"hi"}', hubSigned('{"zen":"hi"}', 'ping', 'g-ping')),
    t('POST', '/webhook', 202, LABELLED, hubSigned(LABELLED, 'issues', 'g-1')),
    t('POST', '/webhook', 200, LABELLED, hubSigned(LABELLED, 'issues', 'g-1')),
    t('POST', '/jobs', 202, '{"brief":"tidy the README"}', { authorization: `Bearer ${API}` }),
    t('POST', '/jobs', 200, '{"brief":"tidy the README"}', { authorization: `Bearer ${API}` }),
    t('POST', '/jobs', 400, '{"brief":""}', { authorization: `Bearer ${API}` }),
    t('POST', '/jobs', 401, '{"brief":"x"}'),
    // {id}: the job the 202 above queued, filled in when the probe is sent.
    t('GET', '/jobs/{id}', 200, undefined, { authorization: `Bearer ${API}` }),
    t('GET', '/jobs/j00000000000000000000000000', 404, undefined, { authorization: `Bearer ${API}` }),
    t('GET', '/jobs/j00000000000000000000000000', 401),
  ];
}

/** The trigger routes with no secret set: 503 not_configured, or (GET /jobs on loopback) open to this machine. */
function unconfiguredProbes(): Probe[] {
  return [
    { server: 'trigger', method: 'GET', path: '/jobs/j00000000000000000000000000', status: 404, headers: {} },
    { server: 'trigger', method: 'POST', path: '/webhook', status: 503, body: '{}', headers: {} },
    { server: 'trigger', method: 'GET', path: '/metrics', status: 200, headers: {} },
  ];
}

describe('real responses of every route match the document', () => {
  let cp: TestControl;
  let trigger: TestTrigger;
  let bare: TestTrigger;
  let repo: TestRepo;
  let lastJob = '';

  before(async () => {
    repo = makeRepo();
    cp = await startTestControl({ token: 'tok-contract', env: { ...GIT_ENV }, projects: [repo.repo] });
    await cp.request('PUT', '/v1/config', { body: { max_concurrent_runs: 20 } });
    cp.deps.stores.runs.upsert('local', makeRun(1, { status: 'succeeded', repo_path: null }));
    cp.deps.stores.runs.upsert('local', makeRun(2, { status: 'failed' }));
    cp.deps.stores.runs.upsert('local', makeRun(3, { status: 'running' }));
    cp.deps.stores.artifacts.put('local', 'r000001', {
      path: 'diffstat.json', content_type: 'application/json', created_at: Date.now(),
      content: Buffer.from(JSON.stringify({ files: [{ path: 'src/auth.ts', insertions: 3, deletions: 1 }] })),
    });
    trigger = await startTestTrigger();
    bare = await startTestTrigger({ GITHUB_WEBHOOK_SECRET: undefined, SVC_API_TOKEN: undefined });
  });
  after(async () => {
    // The started run is stopped, so no worker outlives the test.
    const started = cp.deps.stores.runs.list({ limit: 50 }).find((r) => r.brief === 'contract');
    if (started) await cp.request('POST', `/v1/runs/local/${started.run}/stop`, { body: {} }).catch(() => undefined);
    await cp.close();
    await trigger.cleanup();
    await bare.cleanup();
    repo.cleanup();
  });

  it('has a probe for every route of both route tables', () => {
    const probed = new Set(probes('/r').map((p) => {
      const found = findOperation(doc as never, p.method, p.path.split('?')[0]!);
      return `${p.server} ${p.method} ${found?.template ?? p.path}`;
    }));
    const routes = [
      ...[...routeKeys(controlRoutes)].map((k) => `control ${k}`),
      ...[...routeKeys(triggerRoutes)].map((k) => `trigger ${k}`),
    ];
    assert.deepEqual(routes.filter((r) => !probed.has(r)), []);
  });

  it('answers every probe with the expected status and a status and body the document gives that route', async () => {
    const served = (await cp.request('GET', '/v1/openapi.json')).json;
    for (const probe of [...probes(repo.repo), ...unconfiguredProbes().map((u) => ({ ...u, bare: true }))]) {
      const p = { ...probe, path: probe.path.replace('{id}', lastJob) };
      const base = p.server === 'control' ? cp.url : 'bare' in p ? bare.url : trigger.url;
      const headers: Record<string, string> = { ...p.headers };
      if (p.server === 'control') headers.authorization ??= 'Bearer tok-contract';
      if (p.body !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(base + p.path, { method: p.method, headers, ...(p.body === undefined ? {} : { body: p.body }) });
      // A stream never ends by itself: its status and media type are what the document describes.
      const streaming = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
      const text = streaming ? (await res.body?.cancel(), '') : await res.text();
      const json = (res.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : undefined;
      assert.equal(res.status, p.status, `${p.server} ${p.method} ${p.path}: ${text}`);
      if (p.server === 'trigger' && p.path === '/jobs' && res.status === 202) lastJob = json.job_id;
      const problems = checkResponse(served, { method: p.method, path: p.path.split('?')[0]!, status: res.status, contentType: res.headers.get('content-type'), json });
      assert.deepEqual(problems, [], `${p.server} ${p.method} ${p.path}`);
      // A query parameter the route took is one the document names for it.
      const url = new URL(p.path, 'http://x');
      const params: Array<{ in: string; name: string }> = findOperation(served, p.method, url.pathname)?.op.parameters ?? [];
      const named = params.filter((q) => q.in === 'query').map((q) => q.name);
      for (const key of url.searchParams.keys()) assert.ok(named.includes(key), `${p.method} ${p.path}: "${key}" is not documented`);
    }
  });

  it('fails on a planted mismatch: an undocumented status, a wrong field type, a missing field', () => {
    const run = { source: 'local', run: 'r1', status: 'succeeded', group_id: 'r1' };
    assert.deepEqual(checkResponse(doc as never, { method: 'GET', path: RUN_PATH, status: 200, contentType: 'application/json', json: { ...run, artifacts: [], pending_answer: null, attempts: [], refusals: {}, key_moved: false, receipt_check: null } }), []);
    assert.match(checkResponse(doc as never, { method: 'GET', path: '/v1/runs', status: 418, contentType: 'application/json', json: {} })[0] ?? '', /status not documented/);
    assert.match(checkResponse(doc as never, { method: 'POST', path: '/v1/start', status: 202, contentType: 'application/json', json: { ...run, status: 'done' } })[0] ?? '', /\$\.status/);
    assert.match(checkResponse(doc as never, { method: 'GET', path: '/v1/runs', status: 200, contentType: 'application/json', json: { items: [] } })[0] ?? '', /missing "next_cursor"/);
    assert.match(checkResponse(doc as never, { method: 'GET', path: '/v1/review/risk', status: 200, contentType: 'application/json', json: { score: 1, level: 'low', reasons: [], files: [{ path: 'a' }] } })[0] ?? '', /files\[0\]: missing/);
  });

  it('takes the README\'s partial config body and the `{}` action body a client may send', () => {
    const op = doc.paths['/v1/config']!.put;
    assert.deepEqual(validate(doc as never, op.requestBody.content['application/json'].schema, { retention_days: 30 }), []);
    assert.deepEqual(validate(doc as never, op.requestBody.content['application/json'].schema, { config: { retention_days: 30 }, version: 2 }), []);
    assert.notDeepEqual(validate(doc as never, op.requestBody.content['application/json'].schema, { config: {}, extra: 1 }), []);
    const stop = doc.paths['/v1/runs/{source}/{run}/stop']!.post;
    assert.equal(stop.requestBody.required, false);
    assert.deepEqual(validate(doc as never, stop.requestBody.content['application/json'].schema, {}), []);
  });

  it('marks the Control Plane token optional and the trigger /jobs token required', () => {
    assert.deepEqual(doc.paths['/v1/runs']!.get.security, [{ controlToken: [] }, {}]);
    assert.deepEqual(doc.paths['/jobs']!.post.security, [{ triggerApiToken: [] }]);
    assert.deepEqual(doc.paths['/health']!.get.security, []);
    assert.ok((doc as unknown as { tags: Array<{ description?: string }> }).tags.every((t) => t.description));
  });
});
