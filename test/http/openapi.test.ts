import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { controlRoutes } from '../../src/control/app.ts';
import { triggerRoutes } from '../../src/trigger/app.ts';
import { buildOpenapi, toOpenapiPath, CONTROL_SERVER, TRIGGER_SERVER } from '../../src/control/openapi.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

type Doc = { paths: Record<string, Record<string, any>>; servers: Array<{ url: string }>; components: Record<string, Record<string, unknown>> };
const doc = buildOpenapi('0.0.0-test') as unknown as Doc;
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
