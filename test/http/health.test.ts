import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

describe('GET /health and /ready', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'health-token' });
  });
  after(() => cp.close());

  it('answers /health with 200 and no token needed', async () => {
    const res = await cp.request('GET', '/health', { token: null });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { status: 'ok' });
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  it('answers /ready with 200 while the database answers', async () => {
    const res = await cp.request('GET', '/ready', { token: null });
    assert.equal(res.status, 200);
  });

  it('answers /ready with 503 unavailable when the database query fails', async () => {
    const runs = cp.deps.stores.runs;
    const original = runs.ping;
    runs.ping = () => {
      throw new Error('disk I/O error');
    };
    try {
      const res = await cp.request('GET', '/ready', { token: null });
      assert.equal(res.status, 503);
      assert.equal(res.json.error.code, 'unavailable');
      assert.doesNotMatch(res.text, /disk I\/O/);
    } finally {
      runs.ping = original;
    }
  });
});
