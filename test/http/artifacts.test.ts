import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { startTestControl, makeRun, type TestControl } from '../helpers/control-server.ts';

const RECEIPT = Buffer.from('{"verdict":"verified"}');

/** Sends a raw request path untouched (fetch would normalise `..` and backslashes before they reach the server). */
function rawGet(url: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('GET /v1/runs/:source/:run/artifact/*path', () => {
  let cp: TestControl;
  const base = '/v1/runs/local/r000001/artifact';
  before(async () => {
    cp = await startTestControl();
    const { runs, artifacts } = cp.deps.stores;
    runs.upsert('local', makeRun(1));
    artifacts.put('local', 'r000001', { path: 'receipt.json', content_type: 'application/json', content: RECEIPT });
    artifacts.put('local', 'r000001', { path: 'checks/test output.log', content_type: 'text/plain; charset=utf-8', content: Buffer.from('ok\n') });
    artifacts.put('local', 'r000001', { path: 'report.html', content_type: 'text/html', content: Buffer.from('<script>alert(1)</script>') });
    artifacts.put('local', 'r000001', { path: 'bundle.tar', content_type: 'application/x-tar', content: Buffer.from([0, 1, 2]) });
    const script = Buffer.from('fetch("/v1/runs").then((r) => r.text()).then((t) => navigator.sendBeacon("//x", t))');
    for (const [path, type] of [['evil.js', 'text/javascript; charset=utf-8'], ['evil.mjs', 'application/javascript'],
      ['evil.es', 'application/x-ecmascript'], ['evil.css', 'text/css']]) {
      artifacts.put('local', 'r000001', { path: path!, content_type: type!, content: script });
    }
  });
  after(() => cp.close());

  it('serves a JSON artifact inline with a sha256 ETag', async () => {
    const res = await cp.request('GET', `${base}/receipt.json`);
    assert.equal(res.status, 200);
    assert.equal(res.text, RECEIPT.toString());
    assert.equal(res.headers.get('etag'), `"${createHash('sha256').update(RECEIPT).digest('hex')}"`);
    assert.equal(res.headers.get('content-disposition'), 'inline');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  });

  it('answers 304 to an If-None-Match naming its ETag as given, weakened, in a list or as *', async () => {
    const etag = (await cp.request('GET', `${base}/receipt.json`)).headers.get('etag')!;
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await cp.request('GET', `${base}/receipt.json`, { headers: { 'if-none-match': tag } });
      assert.equal(res.status, 304, tag);
      assert.equal(res.text, '', tag);
    }
    const other = await cp.request('GET', `${base}/receipt.json`, { headers: { 'if-none-match': '"other"' } });
    assert.equal(other.status, 200);
  });

  it('serves nested paths with escaped characters', async () => {
    const res = await cp.request('GET', `${base}/checks/test%20output.log`);
    assert.equal(res.status, 200);
    assert.equal(res.text, 'ok\n');
  });

  it('sends binary types as an attachment', async () => {
    const res = await cp.request('GET', `${base}/bundle.tar`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-disposition') ?? '', /^attachment; filename="bundle.tar"/);
  });

  it('neither lists nor serves an artifact stored, before ingest refused such names, under one with a credential',
    async () => {
      const named = 'curl/Authorization: Bearer SECRET-NAME-1.txt';
      cp.deps.stores.artifacts.put('local', 'r000001',
        { path: named, content_type: 'text/plain', content: Buffer.from('x') });
      const detail = await cp.request('GET', '/v1/runs/local/r000001');
      assert.equal(detail.status, 200);
      assert.equal(detail.text.includes('SECRET-NAME-1'), false, detail.text);
      assert.ok(detail.json.artifacts.some((a: { path: string }) => a.path === 'receipt.json'));
      const res = await cp.request('GET', `${base}/${named.split('/').map(encodeURIComponent).join('/')}`);
      assert.equal(res.status, 400);
      assert.equal(res.text.includes('SECRET-NAME-1'), false, res.text);
    });

  it('answers 404 for a missing artifact and for an unknown run', async () => {
    assert.equal((await cp.request('GET', `${base}/nope.txt`)).status, 404);
    assert.equal((await cp.request('GET', '/v1/runs/local/zzz/artifact/receipt.json')).status, 404);
  });

  describe('security', () => {
    it('sandboxes an HTML artifact so it can never run script in our origin', async () => {
      const res = await cp.request('GET', `${base}/report.html`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-security-policy'), "default-src 'none'; sandbox");
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    });

    it('serves an artifact typed as script or style as plain text: no page of ours can load it as one', async () => {
      // <script src> and <link rel=stylesheet> ignore the disposition and the sandbox CSP: only the type stops them.
      for (const path of ['evil.js', 'evil.mjs', 'evil.es', 'evil.css']) {
        const res = await cp.request('GET', `${base}/${path}`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8', path);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      }
    });

    it('serves an artifact whose stored type a header cannot carry as octet-stream, never a 500', async () => {
      const { artifacts } = cp.deps.stores;
      const types = ['text/plain\n;a=b', 'text/plain;a="\u0000"', 'text/plain;a="\u20ac"', 'text/plain\u2028;a=b'];
      for (const [i, type] of types.entries()) {
        artifacts.put('local', 'r000001', { path: `odd${i}.txt`, content_type: type, content: Buffer.from('x') });
        const res = await cp.request('GET', `${base}/odd${i}.txt`);
        assert.equal(res.status, 200, JSON.stringify(type));
        assert.equal(res.headers.get('content-type'), 'application/octet-stream');
      }
    });

    it('sends artifacts Cache-Control: no-store so no browser or proxy keeps a copy', async () => {
      const res = await cp.request('GET', `${base}/report.html`);
      assert.equal(res.headers.get('cache-control'), 'no-store');
    });

    for (const path of ['..%2F..%2Fcontrol.db', 'a/..%2F..%2Fb', '%2Fetc%2Fpasswd', 'a%5Cb', 'a%00b', 'a//b', '..%5Cx', 'C:%5Cx']) {
      it(`rejects the artifact path ${path} with 400 invalid_param`, async () => {
        const res = await rawGet(cp.url, `${base}/${path}`);
        assert.equal(res.status, 400, res.body);
        assert.equal(JSON.parse(res.body).error.code, 'invalid_param');
      });
    }

    for (const path of ['%2E%2E/%2E%2E/%2E%2E/x', '../../x', './receipt.json']) {
      it(`refuses the dot-segment path ${path} with 400 before it can resolve into another route`, async () => {
        const res = await rawGet(cp.url, `${base}/${path}`);
        assert.equal(res.status, 400, res.body);
      });
    }

    it('never reaches the filesystem for a path that looks like one', async () => {
      const res = await rawGet(cp.url, `${base}/..%2F..%2F..%2F..%2Fetc%2Fhostname`);
      assert.equal(res.status, 400);
    });
  });
});
