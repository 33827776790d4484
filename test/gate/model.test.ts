// The model API mode: a CLI sends plain HTTP to /_model/<name>/... with a placeholder key; the gate forwards over
// TLS (or plain HTTP to a loopback server the policy names exactly) with the real key, to that API's host only.
// Upstreams are loopback servers; model.test resolves to 127.0.0.1 through a stand-in resolver.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpsServer } from 'node:https';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { decide, parseGatePolicy, GatePolicyError } from '../../src/gate/policy.ts';
import { loadGatePolicy } from '../../src/gate/main.ts';
import { MODEL_APIS, modelRoute, modelRoutesFromEnv } from '../../src/gate/model-apis.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import {
  gateConnect, gateRequest, getOverTls, handTo, makeCert, recordingConnect, startUpstream, tableResolver, tempDir,
  type Cert, type Upstream,
} from './helpers.ts';

const REAL = { anthropic: 'sk-ant-REAL-anthropic', openai: 'sk-REAL-openai', gemini: 'REAL-gemini' };

describe('egress gate model API mode', () => {
  const tmp = tempDir();
  const recorder = recordingConnect();
  const records: EgressRecord[] = [];
  let cert: Cert;
  let tlsModel: Upstream;
  let plainModel: Upstream;
  let other: Upstream;
  let gate: Gate;
  let untrusted: Gate;
  let models: ReturnType<typeof modelRoute>[];

  before(async () => {
    cert = makeCert(tmp.path);
    tlsModel = await startUpstream('127.0.0.1', cert);
    plainModel = await startUpstream('127.0.0.2');
    other = await startUpstream('127.0.0.2');
    const { resolve } = tableResolver({ 'model.test': ['127.0.0.1'], 'other.test': ['127.0.0.2'] });
    const policy = parseGatePolicy({
      allow: ['model.test', `127.0.0.1:${tlsModel.port}`, `127.0.0.2:${plainModel.port}`, 'other.test',
        `127.0.0.2:${other.port}`],
    });
    models = [
      modelRoute('anthropic', `https://model.test:${tlsModel.port}`, 'x-api-key', REAL.anthropic),
      modelRoute('openai', `http://127.0.0.2:${plainModel.port}/v1`, 'authorization', `Bearer ${REAL.openai}`),
      modelRoute('gemini', `https://127.0.0.1:${tlsModel.port}`, 'x-goog-api-key', REAL.gemini),
      modelRoute('unlisted', 'https://api.example.com', 'x-api-key', 'sk-unlisted'),
    ];
    gate = await startGate({
      policy, models, resolve, connect: recorder.connect, ca: cert.cert,
      onRecord: (r) => records.push(r),
    });
    // The same routes without the test certificate trusted: TLS must fail before any key is sent.
    untrusted = await startGate({ policy, models, resolve, tcpPort: 0, connect: recordingConnect().connect });
    handed = await handTo(gate);
  });

  after(async () => {
    await gate.close();
    await untrusted.close();
    await tlsModel.close();
    await plainModel.close();
    await other.close();
    tmp.remove();
  });

  /** The gate's port as a sandbox hands it in (spawn-group.ts). */
  let handed: { port: number };

  it('forwards over TLS with the real key in place of the placeholder and any other credential', async () => {
    const reply = await gateRequest(handed, '/_model/anthropic/v1/messages?beta=true', {
      method: 'POST', body: '{"model":"x"}',
      headers: {
        'x-api-key': MODEL_APIS.anthropic?.placeholder ?? '', authorization: 'Bearer leaked', 'anthropic-version': '1',
      },
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'upstream POST /v1/messages?beta=true');
    assert.equal(reply.headers['x-upstream'], 'yes');
    const seen = tlsModel.seen.at(-1);
    assert.equal(seen?.headers['x-api-key'], REAL.anthropic);
    assert.equal(seen?.headers.authorization, undefined);
    assert.equal(seen?.headers['anthropic-version'], '1');
    assert.equal(seen?.headers.host, `model.test:${tlsModel.port}`);
    assert.equal(seen?.body, '{"model":"x"}');
    const record = records.find((r) => r.kind === 'model' && r.model === 'anthropic');
    assert.equal(record?.decision, 'allowed');
    assert.equal(record?.host, 'model.test');
    assert.equal(record?.method, 'POST');
    assert.ok(!JSON.stringify(records).includes('REAL'), 'no key in the evidence');
  });

  it('forwards to a loopback plain-HTTP server named exactly, under the base path, with a Bearer key', async () => {
    const headers = { authorization: 'Bearer sk-svc-gate-placeholder' };
    const reply = await gateRequest(handed, '/_model/openai/chat/completions', { headers });
    assert.equal(reply.status, 200);
    const seen = plainModel.seen.at(-1);
    assert.equal(seen?.url, '/v1/chat/completions');
    assert.equal(seen?.headers.authorization, `Bearer ${REAL.openai}`);
  });

  it('sends the gemini key as x-goog-api-key to an IP-literal TLS server', async () => {
    const headers = { 'x-goog-api-key': 'placeholder' };
    const reply = await gateRequest(handed, '/_model/gemini/v1beta/models', { headers });
    assert.equal(reply.status, 200);
    assert.equal(tlsModel.seen.at(-1)?.headers['x-goog-api-key'], REAL.gemini);
  });

  it('sends the key to the named host only: other destinations get what the client sent', async () => {
    const headers = { 'x-api-key': 'sk-ant-svc-gate-placeholder' };
    const viaHttp = await gateRequest(handed, `http://other.test:${other.port}/`, { headers });
    assert.equal(viaHttp.status, 200);
    const otherTls = await startUpstream('127.0.0.2', cert);
    const literal = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.2:${otherTls.port}`] }), tcpPort: 0, models,
      connect: recordingConnect().connect,
    });
    try {
      const opened = await gateConnect({ port: literal.port ?? 0 }, `127.0.0.2:${otherTls.port}`);
      assert.ok('socket' in opened);
      await getOverTls(opened.socket, '127.0.0.2', '/tunnel', cert.cert);
    } finally {
      await literal.close();
      await otherTls.close();
    }
    assert.equal(other.seen.length, 1);
    assert.equal(otherTls.seen.length, 1);
    assert.equal(other.seen[0]?.headers['x-api-key'], 'sk-ant-svc-gate-placeholder');
    const everything = JSON.stringify([
      ...other.seen, ...otherTls.seen, ...plainModel.seen.map((s) => s.headers['x-api-key']),
    ]);
    assert.ok(!everything.includes(REAL.anthropic), 'the anthropic key went nowhere but its own host');
  });

  it('refuses a CONNECT to a model API it holds the key of, by name on any port or by its address', async () => {
    // One route, at a name; the policy allows every spelling below, but a tunnel's calls would be unmetered.
    const api = await startUpstream('127.0.0.1', cert);
    const alt = await startUpstream('127.0.0.1', cert);
    const own = recordingConnect();
    const { resolve } = tableResolver({ 'model.test': ['::ffff:127.0.0.1'], 'alias.test': ['127.0.0.1'] });
    const seen: EgressRecord[] = [];
    const held = await startGate({
      policy: parseGatePolicy({
        allow: ['model.test', 'alias.test', `127.0.0.1:${api.port}`, `127.0.0.1:${alt.port}`],
      }),
      models: [modelRoute('anthropic', `https://model.test:${api.port}`, 'x-api-key', REAL.anthropic)],
      resolve, connect: own.connect, tcpPort: 0, onRecord: (r) => seen.push(r),
    });
    try {
      const at = { port: held.port ?? 0 };
      for (const target of [`model.test:${api.port}`, `MODEL.TEST.:${alt.port}`, `127.0.0.1:${api.port}`,
        `[::ffff:127.0.0.1]:${api.port}`]) {
        const reply = await gateConnect(at, target);
        assert.ok(!('socket' in reply) && reply.status === 403, `${target} is refused`);
      }
      assert.deepEqual(own.calls, []);
      assert.ok(seen.every((r) => /the anthropic model API, whose key the gate holds/.test(r.reason ?? '')));
      // The same address at another port is another server, and another name at the API's address and port is another
      // site (a CDN's): tunnelled as ever.
      for (const target of [`127.0.0.1:${alt.port}`, `alias.test:${alt.port}`, `alias.test:${api.port}`]) {
        const opened = await gateConnect(at, target);
        assert.ok('socket' in opened, `${target} opens: ${JSON.stringify(seen.at(-1))}`);
        opened.socket.destroy();
      }
    } finally {
      await held.close();
      await api.close();
      await alt.close();
    }
  });

  it('refuses a model API whose host the policy does not allow, before connecting', async () => {
    const before = recorder.calls.length;
    const reply = await gateRequest(handed, '/_model/unlisted/v1/x');
    assert.equal(reply.status, 403);
    assert.equal(recorder.calls.length, before);
  });

  it('refuses an unknown model API name with 403', async () => {
    assert.equal((await gateRequest(handed, '/_model/nobody/v1')).status, 403);
    assert.equal((await gateRequest(handed, '/_model/')).status, 403);
  });

  it('sends no key when the upstream certificate is not trusted (502)', async () => {
    const before = tlsModel.seen.length;
    const post = { method: 'POST', body: '{}' };
    const reply = await gateRequest({ port: untrusted.port ?? 0 }, '/_model/anthropic/v1/messages', post);
    assert.equal(reply.status, 502);
    assert.equal(tlsModel.seen.length, before);
  });
});

describe('egress gate model streaming', () => {
  it('passes each chunk of a streamed answer on before the upstream has finished', async () => {
    const tmp = tempDir();
    const cert = makeCert(tmp.path);
    let release: () => void = () => {};
    const released = new Promise<void>((r) => (release = r));
    const server = createHttpsServer({ key: cert.key, cert: cert.cert }, (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      // The second chunk waits for the client to have seen the first: a buffering gate would deadlock here.
      void released.then(() => res.end('data: second\n\n'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const gate = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.1:${port}`] }), tcpPort: 0, ca: cert.cert,
      connect: recordingConnect().connect,
      models: [modelRoute('anthropic', `https://127.0.0.1:${port}`, 'x-api-key', 'k')],
    });
    try {
      const chunks: string[] = await new Promise((resolve, reject) => {
        const seen: string[] = [];
        const path = '/_model/anthropic/v1/messages';
        const req = request({ host: '127.0.0.1', port: gate.port ?? 0, path, method: 'POST' });
        req.on('response', (res) => {
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            seen.push(d);
            if (d.includes('first')) release();
          });
          res.on('end', () => resolve(seen));
        });
        req.on('error', reject);
        req.end('{}');
      });
      assert.equal(chunks.join(''), 'data: first\n\ndata: second\n\n');
    } finally {
      await gate.close();
      server.closeAllConnections();
      server.close();
      tmp.remove();
    }
  });
});

describe('model routes', () => {
  it('reads keys from the environment snapshot, first variable found wins, bases overridable', () => {
    const routes = modelRoutesFromEnv(
      { ANTHROPIC_API_KEY: 'a-key', ANTHROPIC_BASE_URL: 'http://127.0.0.2:9999', GOOGLE_API_KEY: 'g-key',
        OPENAI_API_KEY: '' },
    );
    assert.deepEqual(routes.map((r) => [r.name, r.base.href, r.header, r.value]), [
      ['anthropic', 'http://127.0.0.2:9999/', 'x-api-key', 'a-key'],
      ['gemini', 'https://generativelanguage.googleapis.com/', 'x-goog-api-key', 'g-key'],
    ]);
  });

  it('reads aider\'s key list as aider does, after every variable of a row, a later entry winning', () => {
    const keysOf = (AIDER_API_KEY: string, more: Record<string, string> = {}) =>
      modelRoutesFromEnv({ AIDER_API_KEY, ...more }).map((r) => [r.name, r.value]);
    assert.deepEqual(keysOf('gemini= g-key '), [['gemini', 'g-key']], 'one entry, as --api-key gemini=g-key');
    assert.deepEqual(keysOf('[groq=q-key, cohere=c-key,GOOGLE=g-key]'),
      [['gemini', 'g-key'], ['groq', 'Bearer q-key']]);
    assert.deepEqual(keysOf('["openai=o-1", "openai=o-2"]'), [['openai', 'Bearer o-2']]);
    assert.deepEqual(keysOf('openai=listed', { CODEX_API_KEY: 'own' }), [['openai', 'Bearer own']]);
    // Not a list aider reads: the gate holds none of it.
    for (const value of ['sk-no-provider', '[1, 2]', '{"openai": "k"}', '[openai=k, bare]']) {
      assert.deepEqual(keysOf(value), [], value);
    }
  });

  it('svc gate serve allows each model API\'s upstream at its exact port only, as a run\'s gate does', async () => {
    const routes = modelRoutesFromEnv({
      OPENAI_API_KEY: 'k', ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: 'https://proxy.test:8443',
    });
    const { fallback } = loadGatePolicy(null, routes);
    // Nothing resolves: a destination the policy allows is refused only after, as not resolving.
    const { resolve, lookups } = tableResolver({});
    const reason = async (host: string, port: number) =>
      (await decide({ host, port, literal: false }, fallback, resolve)) as { reason?: string };
    assert.match((await reason('api.openai.com', 443)).reason ?? '', /does not resolve/);
    assert.match((await reason('proxy.test', 8443)).reason ?? '', /does not resolve/);
    for (const [host, port] of [['api.openai.com', 8080], ['api.openai.com', 80], ['proxy.test', 443]] as const) {
      assert.match((await reason(host, port)).reason ?? '', /is not in the allow list/, `${host}:${port}`);
    }
    assert.deepEqual(lookups, ['api.openai.com', 'proxy.test']);
  });

  it('sends OpenAI calls under /v1 for every gate (a run\'s, `svc gate serve`, a job pod\'s): its CLIs append the rest', () => {
    const [openai] = modelRoutesFromEnv({ OPENAI_API_KEY: 'o-key' });
    assert.equal(openai?.base.href, 'https://api.openai.com/v1');
  });

  it('refuses plain http to anything but a loopback address', () => {
    assert.throws(() => modelRoute('openai', 'http://api.openai.com', 'authorization', 'k'), GatePolicyError);
    assert.throws(() => modelRoute('openai', 'http://10.0.0.1', 'authorization', 'k'), GatePolicyError);
    assert.throws(() => modelRoute('openai', 'https://user:pw@api.openai.com', 'authorization', 'k'), GatePolicyError);
    assert.equal(modelRoute('local', 'http://[::1]:8080', 'authorization', 'k').base.port, '8080');
  });

  it('refuses a base that is not a URL, and a name that is not a model API name, naming each', () => {
    assert.throws(() => modelRoute('openai', 'api.openai.com', 'authorization', 'k'),
      { name: 'GatePolicyError', message: 'Network pattern "api.openai.com": is not a URL' });
    assert.throws(() => modelRoute('Open AI', 'https://api.openai.com', 'authorization', 'k'),
      { name: 'GatePolicyError', message: 'Network pattern "Open AI": is not a model API name' });
  });
});
