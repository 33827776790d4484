// `/_model/<api>/<path>` reaches that API's base path and nothing above it: every spelling of a dot segment a
// destination might decode is resolved by the gate, and a path that climbs out of the base is refused before any
// connection opens (the real key would go with it). The upstream is a loopback server that records what it got.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { modelPath, modelRoute } from '../../src/gate/model-apis.ts';
import { gateRequest, rawExchange, recordingConnect, startUpstream, type Upstream } from './helpers.ts';

/** The status line the gate answers to a request target written byte for byte (no client library rewriting it). */
async function rawStatus(port: number, target: string): Promise<number> {
  const text = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: gate\r\nConnection: close\r\n\r\n`);
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
}

/** modelPath's forwarded path alone (its `endpoint` is tested with the metering). */
const pathOf = (base: string, rest: string) => {
  const resolved = modelPath(base, rest);
  return 'refused' in resolved ? resolved : { path: resolved.path };
};

describe('egress gate model API paths', () => {
  const recorder = recordingConnect();
  let upstream: Upstream;
  let gate: Gate;

  before(async () => {
    upstream = await startUpstream('127.0.0.2');
    gate = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.2:${upstream.port}`] }), tcpPort: 0, connect: recorder.connect,
      models: [modelRoute('anthropic', `http://127.0.0.2:${upstream.port}/api/v1`, 'x-api-key', 'sk-REAL')],
    });
  });

  after(async () => {
    await gate.close();
    await upstream.close();
  });

  const escapes = [
    '/_model/anthropic/../admin/x', '/_model/anthropic/../../admin/x', '/_model/anthropic/%2e%2e/admin/x',
    '/_model/anthropic/%2E%2e/%2e%2E/admin', '/_model/anthropic/.%2e/admin', '/_model/anthropic/messages/../../admin',
    '/_model/anthropic/..%2fadmin', '/_model/anthropic/%2e%2e%2fadmin', '/_model/anthropic/..%5cadmin',
    '/_model/anthropic/..\\admin', '/_model/anthropic/%252e%252e/admin', '/_model/anthropic/..;/admin',
    '/_model/anthropic/.../admin', '/_model/anthropic/a/..%00/admin', '/_model/anthropic/..',
    // `..%3b` is `..;` once a servlet container decodes it: `..` to it, a plain segment to the gate.
    '/_model/anthropic/..%3b/admin', '/_model/anthropic/..%3B/..%3B/admin', '/_model/anthropic/%2e%2e%3bx/admin',
  ];
  for (const target of escapes) {
    it(`refuses ${target} before connecting, with the key unsent`, async () => {
      const calls = recorder.calls.length;
      const seen = upstream.seen.length;
      const status = await rawStatus(gate.port ?? 0, target);
      assert.ok(status === 403 || status === 400, `refused, got ${status}`);
      assert.equal(recorder.calls.length, calls, 'no connection opened');
      assert.equal(upstream.seen.length, seen);
    });
  }

  it('resolves dot segments that stay inside the base and forwards the resolved path', async () => {
    const reply = await gateRequest({ port: gate.port ?? 0 }, '/_model/anthropic/messages/./batch/../count?x=a/../b');
    assert.equal(reply.status, 200);
    assert.equal(upstream.seen.at(-1)?.url, '/api/v1/messages/count?x=a/../b');
    assert.equal(upstream.seen.at(-1)?.headers['x-api-key'], 'sk-REAL');
  });

  it('keeps ordinary paths as they were: the base, a trailing slash, a query alone', () => {
    assert.deepEqual(pathOf('/v1', '/chat/completions'), { path: '/v1/chat/completions' });
    assert.deepEqual(pathOf('/', '/v1/messages'), { path: '/v1/messages' });
    assert.deepEqual(pathOf('/', ''), { path: '/' });
    assert.deepEqual(pathOf('/v1', ''), { path: '/v1' });
    assert.deepEqual(pathOf('/v1/', '/'), { path: '/v1/' });
    assert.deepEqual(pathOf('/', '?key=1'), { path: '/?key=1' });
    assert.deepEqual(pathOf('/', '/v1beta/models/gemini-pro:generateContent'), {
      path: '/v1beta/models/gemini-pro:generateContent',
    });
    assert.ok('refused' in modelPath('/', '/..'));
  });

  it('refuses the endpoints whose cost is not in their answer (batches, fine-tunes, uploads), in any spelling', () => {
    const refused = [
      ['/', '/v1/messages/batches'], ['/v1', '/batches'], ['/v1', '/fine_tuning/jobs'], ['/v1', '/files'],
      ['/', '/v1beta/models/gemini-2.5-pro:batchGenerateContent'], ['/', '/v1beta/batches/x'],
      ['/v1', '/Batches'], ['/v1', '/x/../batches'], ['/', '/v1/messages/%62atches'], ['/', '/v1/%ff'],
      ['/', '/v1beta/cachedContents'], ['/v1', '/images/generations'], ['/v1', '/threads/t1/runs'],
      ['/v1', '/batch/jobs'], ['/v1', '/batches;x=1'], ['/v1', '/batches.'], ['/v1', '/batches%20'],
      ['/', '/v1beta/models/imagen:predict'], ['/v1', '/conversations'], ['/v1', '/conversations/c1/items'],
      ['/v1', '/%63onversations'],
    ];
    for (const [base, rest] of refused) assert.ok('refused' in modelPath(base!, rest!), `${base} ${rest}`);
    for (const rest of ['/v1/messages', '/v1/messages/count_tokens', '/v1beta/models/g:streamGenerateContent']) {
      assert.ok('path' in modelPath('/', rest), rest);
    }
    // Only what follows the API's base is read: an operator's base may hold any name.
    assert.deepEqual(pathOf('/audio/v1', '/chat/completions'), { path: '/audio/v1/chat/completions' });
  });

  it('refuses a batch before connecting, with the key unsent', async () => {
    const calls = recorder.calls.length;
    const reply = await gateRequest({ port: gate.port ?? 0 }, '/_model/anthropic/messages/batches',
      { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    assert.equal(reply.status, 403);
    assert.equal(recorder.calls.length, calls);
  });
});
