import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { controlRoutes } from '../../src/control/app.ts';

const TOKEN = 'security-token-abcdef0123456789';
const MiB = 1024 * 1024;
const JSON_TYPE = { 'content-type': 'application/json' };

describe('security', () => {
  let open: TestControl;
  let locked: TestControl;
  let pub: TestControl;

  before(async () => {
    open = await startTestControl();
    locked = await startTestControl({ token: TOKEN });
    pub = await startTestControl({ token: TOKEN, host: '0.0.0.0' });
    for (const c of [open, locked]) {
      c.deps.stores.runs.upsert('local', makeRun(1, { status: 'succeeded' }));
      c.deps.stores.artifacts.put('local', 'r000001', { path: 'logs/check.txt', content_type: 'text/plain', content: Buffer.from('check ok\n'), created_at: Date.now() });
    }
  });
  after(async () => {
    await Promise.all([open.close(), locked.close(), pub.close()]);
  });

  describe('bearer token', () => {
    it('refuses /v1/* without a token, with a wrong one, or with one in the query string', async () => {
      const attempts: Array<Record<string, string>> = [{}, { authorization: 'Bearer wrong' }, { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }];
      for (const headers of attempts) {
        const res = await rawRequest(locked.url, '/v1/runs', { headers });
        assert.equal(res.status, 401);
        assert.equal(res.headers['www-authenticate'], 'Bearer');
      }
      assert.equal((await rawRequest(locked.url, `/v1/runs?token=${TOKEN}`)).status, 401);
      assert.equal((await rawRequest(locked.url, `/v1/runs?access_token=${TOKEN}`)).status, 401);
    });

    it('refuses near-miss tokens: a prefix, an extension, another case, padding inside', async () => {
      for (const t of [TOKEN.slice(0, -1), `${TOKEN}x`, TOKEN.toUpperCase(), ` ${TOKEN.slice(1)}`, `${TOKEN.slice(0, 5)} ${TOKEN.slice(5)}`]) {
        assert.equal((await rawRequest(locked.url, '/v1/stats', { headers: { authorization: `Bearer ${t}` } })).status, 401, t);
      }
      assert.equal((await rawRequest(locked.url, '/v1/stats', { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
    });

    it('compares the token in constant time through safeEqual, never with ===', () => {
      const source = readFileSync(new URL('../../src/http/guards.ts', import.meta.url), 'utf8');
      const body = source.slice(source.indexOf('export function checkBearer'), source.indexOf('export function checkLoopbackOnly'));
      assert.match(body, /safeEqual\(/);
      assert.doesNotMatch(body, /[!=]==?\s*token|token\s*[!=]==?/);
      assert.match(source, /timingSafeEqual/);
    });

    it('serves /health and /ready without a token and never echoes the token', async () => {
      assert.equal((await rawRequest(locked.url, '/health')).status, 200);
      assert.equal((await rawRequest(locked.url, '/ready')).status, 200);
      const wrong = await rawRequest(locked.url, '/v1/runs', { headers: { authorization: `Bearer ${TOKEN}-nope` } });
      assert.equal(wrong.text.includes(TOKEN), false);
    });
  });

  describe('Host header (DNS rebinding)', () => {
    it('answers 403 forbidden_host to a foreign Host on every kind of route of a loopback-bound server', async () => {
      for (const path of ['/health', '/v1/runs', '/', '/v1/config']) {
        for (const host of ['evil.example', 'evil.example:47821', '127.0.0.1.evil.example', 'localhost.evil.example:1']) {
          const res = await rawRequest(open.url, path, { headers: { host } });
          assert.equal(res.status, 403, `${path} ${host}`);
          assert.equal(res.json.error.code, 'forbidden_host');
        }
      }
    });

    it('accepts localhost, 127.0.0.1 and [::1] on any port', async () => {
      for (const host of ['localhost', 'localhost:9', '127.0.0.1:80', '[::1]:47821']) {
        assert.equal((await rawRequest(open.url, '/health', { headers: { host } })).status, 200, host);
      }
    });
  });

  describe('Origin (CSRF)', () => {
    it('refuses a mutation from a foreign origin and accepts one from its own', async () => {
      const body = JSON.stringify({ retention_days: 3 });
      const foreign = await rawRequest(open.url, '/v1/config', { method: 'PUT', body, headers: { ...JSON_TYPE, origin: 'https://evil.example' } });
      assert.equal(foreign.status, 403);
      assert.equal(foreign.json.error.code, 'forbidden_origin');
      const opaque = await rawRequest(open.url, '/v1/config', { method: 'PUT', body, headers: { ...JSON_TYPE, origin: 'null' } });
      assert.equal(opaque.status, 403);
      const own = await rawRequest(open.url, '/v1/config', { method: 'PUT', body, headers: { ...JSON_TYPE, origin: open.url } });
      assert.equal(own.status, 200, own.text);
    });

    it('refuses a foreign origin on POST and DELETE as well', async () => {
      const post = await rawRequest(open.url, '/v1/runs/local/r000001/stop', { method: 'POST', body: '{}', headers: { ...JSON_TYPE, origin: 'http://localhost.evil.example' } });
      assert.equal(post.json.error.code, 'forbidden_origin');
      const del = await rawRequest(open.url, '/v1/runs/local/r000001', { method: 'DELETE', headers: { origin: 'http://evil.example' } });
      assert.equal(del.json.error.code, 'forbidden_origin');
    });

    it('sends no CORS headers, so a foreign page cannot read answers', async () => {
      const res = await rawRequest(open.url, '/v1/runs', { headers: { origin: 'https://evil.example' } });
      assert.equal(res.headers['access-control-allow-origin'], undefined);
    });
  });

  describe('cross-site browser requests (Fetch Metadata)', () => {
    // What Chromium sends for a page on another local origin looping `fetch(url, {mode: 'no-cors'})` or an <img>.
    const attacks: Array<[string, Record<string, string>]> = [
      ['a no-cors fetch from another site', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'empty' }],
      ['an <img> from another port of localhost', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image' }],
      ['a cors fetch from another port of localhost', { 'sec-fetch-site': 'same-site', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }],
      ['a cross-site navigation', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' }],
      ['a same-origin no-cors load', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'no-cors', 'sec-fetch-dest': 'image' }],
    ];
    const routes = controlRoutes.map((r) => [r.method, r.pattern.replace(':source', 'local').replace(':run', 'r000001').replace('*path', 'logs/check.txt')] as const);

    for (const [what, headers] of attacks) {
      it(`answers 403 forbidden_origin to ${what} on every route, with the token or without one`, async () => {
        for (const server of [open, locked]) {
          for (const [method, path] of routes) {
            const body = method === 'GET' || method === 'DELETE' ? {} : { body: '{}' };
            const res = await rawRequest(server.url, path, { method, ...body, headers: { ...JSON_TYPE, authorization: `Bearer ${TOKEN}`, ...headers } });
            assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
            assert.equal(res.json.error.code, 'forbidden_origin');
            assert.equal(res.headers['access-control-allow-origin'], undefined);
          }
        }
      });
    }

    it('refuses a looped cross-site stats read before any work: no stats are computed', async () => {
      const reads = open.deps.reads;
      const original = reads.stats;
      let asked = 0;
      reads.stats = (f) => {
        asked++;
        return original.call(reads, f);
      };
      try {
        for (let i = 0; i < 20; i++) {
          const res = await rawRequest(open.url, `/v1/stats?since=${1_700_000_000_000 + i}`, { headers: attacks[0]![1] });
          assert.equal(res.status, 403);
        }
        assert.equal(asked, 0);
        assert.equal((await rawRequest(open.url, '/v1/stats?since=1700000000000')).status, 200);
        assert.equal(asked, 1);
      } finally {
        reads.stats = original;
      }
    });

    it('writes nothing for a refused cross-site mutation: the run is not stopped and the audit chain is unchanged', async () => {
      open.deps.refusals!.flush(true);
      const before = (await rawRequest(open.url, '/v1/audit?limit=500')).json.items.length;
      const res = await rawRequest(open.url, '/v1/runs/local/r000001', { method: 'DELETE', headers: attacks[0]![1] });
      assert.equal(res.status, 403);
      open.deps.refusals!.flush(true);
      assert.equal((await rawRequest(open.url, '/v1/audit?limit=500')).json.items.length, before);
      assert.ok(open.deps.stores.runs.get('local', 'r000001'));
    });

    it('serves the UI itself (same-origin), an address typed in the browser (none), and curl (no such header)', async () => {
      const ui = { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' };
      const typed = { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' };
      for (const headers of [ui, typed, {}]) {
        assert.equal((await rawRequest(open.url, '/v1/stats', { headers })).status, 200, JSON.stringify(headers));
        assert.equal((await rawRequest(locked.url, '/v1/runs', { headers: { ...headers, authorization: `Bearer ${TOKEN}` } })).status, 200);
      }
      const put = await rawRequest(open.url, '/v1/config', { method: 'PUT', body: '{"retention_days":3}', headers: { ...JSON_TYPE, ...ui, origin: open.url } });
      assert.equal(put.status, 200, put.text);
    });

    it('still serves the UI files to a cross-site navigation (a link from a chat message opens the dashboard)', async () => {
      const res = await rawRequest(open.url, '/', { headers: attacks[3]![1] });
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /text\/html/);
    });
  });

  describe('content type', () => {
    it('answers 415 to a JSON route called with another or no content type', async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined]) {
        const headers: Record<string, string> = type ? { 'content-type': type } : {};
        const res = await rawRequest(open.url, '/v1/config', { method: 'PUT', body: '{"retention_days":1}', headers });
        assert.equal(res.status, 415, String(type));
        assert.equal(res.json.error.code, 'unsupported_media_type');
      }
    });

    it('lets stop and DELETE come without a body, but a body they carry must be JSON', async () => {
      const routes: Array<[string, string]> = [['POST', '/v1/runs/local/rnobody/stop'], ['DELETE', '/v1/runs/local/rnobody'], ['POST', '/v1/runs/local/rnobody/resume']];
      for (const [method, path] of routes) {
        for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
          const headers: Record<string, string> = type ? { 'content-type': type } : {};
          const bodied = await rawRequest(open.url, path, { method, body: 'reason=x', headers });
          assert.equal(bodied.status, 415, `${method} ${path} with a ${String(type)} body`);
          assert.equal(bodied.json.error.code, 'unsupported_media_type');
          const bare = await rawRequest(open.url, path, { method, headers });
          assert.equal(bare.status, 404, `${method} ${path} without a body (${String(type)}) reaches the handler`);
        }
        const json = await rawRequest(open.url, path, { method, body: '{}', headers: JSON_TYPE });
        assert.equal(json.status, 404, `${method} ${path} with a JSON body`);
      }
    });
  });

  describe('loopback-only routes on a non-loopback bind', () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const cases: Array<[string, string, string | undefined]> = [
      ['PUT', '/v1/config', '{}'],
      ['GET', '/v1/keys', undefined],
      ['GET', '/v1/repos', undefined],
      ['POST', '/v1/start', '{"brief":"x","repo":"/tmp"}'],
      ['POST', '/v1/runs', '{"brief":"x","repo":"/tmp"}'],
      ['POST', '/v1/runs/local/r000001/stop', '{}'],
      ['POST', '/v1/runs/local/r000001/resume', '{}'],
      ['POST', '/v1/runs/local/r000001/retry', '{}'],
      ['POST', '/v1/merge/run', '{}'],
      ['DELETE', '/v1/runs/local/r000001', undefined],
      ['POST', '/v1/import', '{"path":"/tmp"}'],
    ];
    for (const [method, path, body] of cases) {
      it(`answers 403 loopback_only to ${method} ${path} from a loopback peer when bound to 0.0.0.0`, async () => {
        const res = await rawRequest(pub.url, path, {
          method,
          ...(body === undefined ? {} : { body }),
          headers: { ...auth, ...(body === undefined ? {} : JSON_TYPE) },
          connectHost: '127.0.0.1',
        });
        assert.equal(res.status, 403, res.text);
        assert.equal(res.json.error.code, 'loopback_only');
      });
    }

    it('still serves read routes there with the token, and never hands out the key', async () => {
      const res = await rawRequest(pub.url, '/v1/config', { headers: auth, connectHost: '127.0.0.1' });
      assert.equal(res.status, 200);
      assert.equal(res.json.config.max_concurrent_runs, 2);
      const keys = await rawRequest(pub.url, '/v1/keys', { headers: auth, connectHost: '127.0.0.1' });
      assert.doesNotMatch(keys.text, /BEGIN PUBLIC KEY/);
    });
  });

  describe('GET /v1/config: the machine\'s paths and commands only for a caller on it', () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const config = { repos: ['/srv/private/project'], providers: { mine: { command: ['/opt/agents/mine', '--fast'] } } };
    before(() => {
      for (const c of [locked, pub]) c.deps.stores.config.update(() => config);
    });
    it('shows the registered repository paths and provider commands to a local caller', async () => {
      const res = await rawRequest(locked.url, '/v1/config', { headers: auth });
      assert.equal(res.status, 200);
      assert.deepEqual(res.json.config.repos, config.repos);
      assert.deepEqual(res.json.config.providers, config.providers);
    });
    it('leaves them out for a token holder on a public bind, or behind a same-host proxy, and keeps the rest', async () => {
      const answers = [
        await rawRequest(pub.url, '/v1/config', { headers: auth, connectHost: '127.0.0.1' }),
        await rawRequest(locked.url, '/v1/config', { headers: { ...auth, 'x-forwarded-for': '203.0.113.7' } }),
      ];
      for (const res of answers) {
        assert.equal(res.status, 200);
        assert.deepEqual(Object.keys(res.json.config).sort(), ['default_provider', 'max_concurrent_runs', 'retention_days']);
        assert.doesNotMatch(res.text, /private|agents/);
      }
    });
  });

  describe('GET /v1/providers: a command provider\'s program path only for a caller on this machine', () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const pathOf = (res: { json: Array<{ name: string; path: string | null; available: boolean }> }) =>
      res.json.find((p) => p.name === 'mine');
    before(() => {
      const config = { providers: { mine: { command: ['/bin/sh'] } } };
      for (const c of [locked, pub]) c.deps.stores.config.update(() => config);
    });
    it('shows it to a local caller', async () => {
      const res = await rawRequest(locked.url, '/v1/providers', { headers: auth });
      assert.equal(res.status, 200);
      assert.equal(pathOf(res)?.path, '/bin/sh');
    });
    it('hides it (path null, still available) from a token holder on a public bind or behind a proxy', async () => {
      const answers = [
        await rawRequest(pub.url, '/v1/providers', { headers: auth, connectHost: '127.0.0.1' }),
        await rawRequest(locked.url, '/v1/providers', { headers: { ...auth, 'x-forwarded-for': '203.0.113.7' } }),
      ];
      for (const res of answers) {
        assert.equal(res.status, 200);
        assert.equal(pathOf(res)?.path, null);
        assert.equal(pathOf(res)?.available, true);
      }
    });
  });

  describe('loopback-only routes behind a same-host proxy', () => {
    // A reverse proxy on this host connects from 127.0.0.1: its relay headers are what tell its clients apart.
    const relayHeaders: Array<Record<string, string>> = [
      { forwarded: 'for=203.0.113.7;proto=https' },
      { 'x-forwarded-for': '203.0.113.7' },
      { 'x-forwarded-host': 'svc.example' },
      { 'x-forwarded-proto': 'https' },
      { 'X-Forwarded-Port': '443' },
      { 'x-real-ip': '203.0.113.7' },
      { via: '1.1 proxy' },
    ];
    const loopbackOnly = controlRoutes.filter((r) => r.loopbackOnly);

    it('marks start, stop, resume, retry, pr, delete, merge run, config, keys, repos, projects and import loopback-only', () => {
      const marked = loopbackOnly.map((r) => `${r.method} ${r.pattern}`).sort();
      const expected = ['POST /v1/runs', 'POST /v1/start', 'DELETE /v1/runs/:source/:run', 'POST /v1/runs/:source/:run/stop',
        'POST /v1/runs/:source/:run/resume', 'POST /v1/runs/:source/:run/retry', 'POST /v1/runs/:source/:run/pr',
        'POST /v1/merge/run', 'PUT /v1/config',
        'GET /v1/keys', 'GET /v1/repos', 'GET /v1/projects', 'POST /v1/import'];
      assert.deepEqual(marked, expected.sort());
    });

    for (const route of loopbackOnly) {
      const path = route.pattern.replace(':source', 'local').replace(':run', 'r000001');
      it(`answers 403 proxied_request to ${route.method} ${path} from loopback when a proxy header is present`, async () => {
        for (const relay of relayHeaders) {
          const body = route.method === 'GET' ? {} : { body: '{}' };
          const res = await rawRequest(open.url, path, { method: route.method, ...body, headers: { ...JSON_TYPE, ...relay } });
          assert.equal(res.status, 403, `${JSON.stringify(relay)}: ${res.text}`);
          assert.equal(res.json.error.code, 'proxied_request');
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        }
      });
    }

    it('serves the same loopback-only route without relay headers, and read routes with them', async () => {
      assert.equal((await rawRequest(open.url, '/v1/keys')).status, 200);
      assert.equal((await rawRequest(open.url, '/v1/runs', { headers: { 'x-forwarded-for': '203.0.113.7' } })).status, 200);
    });

    it('records a proxied refusal in the audit chain as anonymous, not local', async () => {
      const res = await rawRequest(open.url, '/v1/runs/local/r000001/stop', { method: 'POST', body: '{}', headers: { ...JSON_TYPE, 'x-forwarded-for': '203.0.113.9' } });
      assert.equal(res.json.error.code, 'proxied_request');
      // The loop above refused the same call already: this repeat is counted into the window's row, written on flush.
      open.deps.refusals!.flush(true);
      const audit = await rawRequest(open.url, '/v1/audit?limit=50');
      const entry = audit.json.items.find((e: { action: string }) => e.action === 'run.stop');
      assert.deepEqual([entry.action, entry.outcome, entry.actor], ['run.stop', 'proxied_request', 'anonymous']);
    });
  });

  describe('artifact paths', () => {
    const traversal = [
      '../../../etc/passwd',
      'logs/../../../etc/passwd',
      '%2e%2e/%2e%2e/etc/passwd',
      '%2E%2E%2F%2E%2E%2Fetc%2Fpasswd',
      'logs%2f..%2f..%2fetc%2fpasswd',
      '..%5c..%5cetc%5cpasswd',
      'logs%5ccheck.txt',
      'logs/check.txt%00.png',
      '%00',
      '/etc/passwd',
      '%2Fetc%2Fpasswd',
      'C:%5cWindows%5cwin.ini',
      'logs/./check.txt',
    ];
    for (const p of traversal) {
      it(`answers 400 to the artifact path ${p}`, async () => {
        const res = await rawRequest(open.url, `/v1/runs/local/r000001/artifact/${p}`);
        assert.equal(res.status, 400, res.text);
        assert.ok(['invalid_param', 'bad_request'].includes(res.json.error.code));
        assert.doesNotMatch(res.text, /root:|check ok/);
      });
    }

    it('still serves a recorded artifact by its plain path', async () => {
      const res = await rawRequest(open.url, '/v1/runs/local/r000001/artifact/logs/check.txt');
      assert.equal(res.status, 200);
      assert.equal(res.text, 'check ok\n');
    });
  });

  describe('request bodies', () => {
    it('answers 413 to a declared Content-Length over the limit without waiting for the bytes', async () => {
      const res = await rawRequest(open.url, '/v1/config', { method: 'PUT', body: Buffer.alloc(MiB + 10, 0x20), headers: JSON_TYPE });
      assert.equal(res.status, 413);
    });

    it('answers 413 to a chunked body that grows past the limit', async () => {
      const chunk = Buffer.alloc(128 * 1024, 0x20);
      const res = await rawRequest(open.url, '/v1/runs/local/r000001/answer', { method: 'POST', headers: JSON_TYPE, chunks: Array.from({ length: 12 }, () => chunk) });
      assert.equal(res.status, 413);
    });

    it('lets ingest take more than 1 MiB (its limit is 16 MiB)', async () => {
      const body = JSON.stringify({ source: 'edge', runs: [], events: [], artifacts: [], pad: 'x'.repeat(2 * MiB) });
      const res = await rawRequest(open.url, '/v1/ingest', { method: 'POST', body, headers: JSON_TYPE });
      assert.notEqual(res.status, 413);
    });

    it('answers 400 invalid_json to malformed JSON without echoing it', async () => {
      for (const body of ['{"retention_days": 1', '{"a":1}}', "{'a':1}", '\u0000{}', '{"secret-marker-77":']) {
        const res = await rawRequest(open.url, '/v1/config', { method: 'PUT', body, headers: JSON_TYPE });
        assert.equal(res.status, 400, body);
        assert.equal(res.json.error.code, 'invalid_json');
        assert.equal(res.text.includes('secret-marker-77'), false);
      }
    });

    it('ignores a __proto__ key instead of polluting prototypes', async () => {
      const res = await rawRequest(open.url, '/v1/config', { method: 'PUT', body: '{"__proto__":{"polluted":true}}', headers: JSON_TYPE });
      assert.ok(res.status === 400 || res.status === 200);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });
  });

  describe('cursors and parameters', () => {
    const bad = [
      '/v1/runs?cursor=garbage',
      '/v1/runs?cursor=%00',
      '/v1/runs?limit=-1',
      '/v1/runs?limit=abc',
      '/v1/runs?limit=1.5',
      '/v1/runs?limit=1e3',
      '/v1/runs?since=not-a-date',
      '/v1/runs?verdict=excellent',
      '/v1/runs?limit=1&limit=2',
      '/v1/audit?cursor=garbage',
      '/v1/audit?limit=0',
      '/v1/notifications?cursor=garbage',
      '/v1/runs/local/r000001/events?after=-5',
      '/v1/stats?until=yesterday',
      '/v1/stats/cost?repo=',
      '/v1/runs/bad%20source/r1',
      '/v1/runs/local/r1%2F..',
    ];
    for (const path of bad) {
      it(`answers 400 to ${path}`, async () => {
        const res = await rawRequest(open.url, path);
        assert.equal(res.status, 400, res.text);
        assert.ok(['invalid_param', 'bad_request'].includes(res.json.error.code), res.json.error.code);
      });
    }

    it('clamps a huge limit to 500 instead of failing', async () => {
      const res = await rawRequest(open.url, '/v1/runs?limit=100000');
      assert.equal(res.status, 200);
    });
  });

  describe('internal errors', () => {
    it('answers a bare 500 with a request id and no input, stack or SQL', async () => {
      const broken = await startTestControl();
      try {
        broken.deps.db.close();
        const res = await rawRequest(broken.url, '/v1/audit?limit=7');
        assert.equal(res.status, 500);
        assert.deepEqual(Object.keys(res.json.error), ['code', 'message']);
        assert.match(res.json.error.message, /^Internal error \(request [0-9a-f-]{36}\)$/);
      } finally {
        await broken.close().catch(() => {});
      }
    });
  });
});
