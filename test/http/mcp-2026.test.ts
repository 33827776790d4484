import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, ProtocolError, StreamableHTTPClientTransport, UnsupportedProtocolVersionError } from '@modelcontextprotocol/client';
import { makeRun, startTestControl, stopActiveRuns, type TestControl } from '../helpers/control-server.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';
import { waitFor } from '../helpers/wait-for.ts';
import {
  makeRepo, grantAgentState, processesEnded, ASK_SCRIPT, EDIT_SCRIPT, GIT_ENV, type TestRepo,
} from '../engine/fixtures.ts';

const TOKEN = 'mcp-2026-test-token-0123456789';
const REVISION = '2026-07-28';
const BEARER = { authorization: `Bearer ${TOKEN}` };

type ToolAnswer = { content: Array<{ type: string; text: string }>; structuredContent?: any; isError?: boolean };

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** The `_meta` envelope every request of this revision carries. */
function meta(version = REVISION, capabilities: Record<string, unknown> = {}) {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': capabilities,
  };
}
function request(method: string, params: Record<string, unknown> = {}, version = REVISION) {
  return { jsonrpc: '2.0', id: 11, method, params: { ...params, _meta: meta(version) } };
}
/** A notification of this revision: the same envelope, no id. */
function notification(method: string, params: Record<string, unknown> = {}, version = REVISION) {
  return { jsonrpc: '2.0', method, params: { ...params, _meta: meta(version) } };
}
function headersFor(method: string, version = REVISION, name?: string): Record<string, string> {
  return { ...BEARER, 'mcp-protocol-version': version, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) };
}
function post(url: string, body: unknown, headers: Record<string, string>): Promise<RawResponse> {
  return rawRequest(url, '/mcp', { method: 'POST', body: JSON.stringify(body), headers: { ...JSON_HEADERS, ...headers } });
}

/**
 * The official v2 client, pinned to revision 2026-07-28 (no fallback to initialize) unless `mode` says otherwise. It
 * can show its user a form (elicitation): `answers` are what the user types, `asked` the messages the form showed.
 */
async function connect(url: string, mode: 'auto' | { pin: string } = { pin: REVISION }, answers: string[] = []) {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: BEARER } });
  const capabilities = { elicitation: { form: {} } };
  const client = new Client({ name: 'svc-test-2026', version: '2.0.0' }, { versionNegotiation: { mode }, capabilities });
  const asked: string[] = [];
  client.setRequestHandler('elicitation/create', (req) => {
    asked.push(req.params.message);
    const answer = answers.shift();
    return answer === undefined ? { action: 'decline' } : { action: 'accept', content: { answer } };
  });
  await client.connect(transport);
  return { client, transport, asked };
}

describe('MCP revision 2026-07-28 at /mcp, through the official v2 client (stateless, beside 2025-11-25)', () => {
  let control: TestControl;
  let repo: TestRepo;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  let asked: string[];
  const answers: string[] = [];

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, ask: ASK_SCRIPT } });
    control = await startTestControl({ token: TOKEN, env: { ...GIT_ENV }, projects: [repo.repo] });
    grantAgentState(control.home, JSON.parse(readFileSync(join(repo.repo, '.svc', 'config.json'), 'utf8')).providers);
    ({ client, transport, asked } = await connect(control.url, { pin: REVISION }, answers));
  });
  after(async () => {
    await client.close();
    await stopActiveRuns(control);
    await processesEnded(repo.root);
    await control.close();
    repo.cleanup();
  });

  async function value(name: string, args: Record<string, unknown> = {}): Promise<any> {
    const answer = (await client.callTool({ name, arguments: args })) as ToolAnswer;
    assert.ok(!answer.isError, `${name}: ${answer.content[0]?.text}`);
    return answer.structuredContent ?? answer.content[0]!.text;
  }

  function settled(run: string, ...statuses: string[]) {
    return waitFor(async () => {
      const r = await value('get_run', { run });
      return statuses.includes(r.status) ? r : null;
    }, `run ${run} to be ${statuses.join(' or ')}`);
  }

  it('discovers the server with server/discover: no initialize, no session', async () => {
    assert.equal(client.getProtocolEra(), 'modern');
    assert.equal(client.getNegotiatedProtocolVersion(), REVISION);
    assert.equal(transport.sessionId, undefined);
    assert.equal(client.getServerVersion()?.name, 'svc');
    const discovered = await client.discover();
    assert.deepEqual(discovered.supportedVersions, [REVISION, '2025-11-25', '2025-06-18']);
    assert.ok(discovered.capabilities.tools);
    assert.deepEqual(discovered.capabilities.resources, { subscribe: true });
    assert.match(discovered.instructions ?? '', /start_run/);
  });

  it("lists svc's tools", async () => {
    const { tools } = await client.listTools();
    assert.ok(tools.length >= 14);
    for (const name of ['list_runs', 'get_run', 'start_run', 'answer_run', 'get_run_diff', 'get_run_receipt']) {
      assert.ok(tools.some((t) => t.name === name), name);
    }
  });

  it('starts a run, answers its question and reads it back, as a tool and as a resource', async () => {
    const started = await value('start_run', { brief: 'migrate', repo: repo.repo, provider: 'ask' });
    assert.deepEqual([started.status, started.source], ['queued', 'local']);
    const blocked = await settled(started.run, 'blocked');
    const question = 'Which database should the migration target?';
    assert.equal(blocked.question, question);
    const uri = `svc://runs/local/${started.run}`;
    // A listener of the run's resource: told when the run changes, and only what it asked for that exists.
    const updates: string[] = [];
    client.setNotificationHandler('notifications/resources/updated', (n) => void updates.push(n.params.uri));
    const streams = control.deps.bus.size();
    const listening = await client.listen({ resourceSubscriptions: [uri, 'svc://runs/local/r-none', 'file:///etc/x'] });
    assert.deepEqual(listening.honoredFilter, { resourceSubscriptions: [uri] });
    assert.equal(control.deps.bus.size(), streams + 1);

    await answerByForm(started.run, question);
    // Left out, the answer is asked of the client's user with the run's question, and their form answers the run.
    answers.push('postgres fixed');
    assert.equal((await value('answer_run', { run: started.run })).run, started.run);
    assert.deepEqual(asked, [`Run local/${started.run} asks: ${question}`]);
    await waitFor(() => updates.includes(uri), 'the listener to hear that the run changed');
    const done = await settled(started.run, 'succeeded', 'failed');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const diff = (await client.callTool({ name: 'get_run_diff', arguments: { run: started.run } })) as ToolAnswer;
    assert.match(diff.content[0]!.text, /^\+postgres fixed$/m);

    const { resources } = await client.listResources();
    assert.ok(resources.some((r) => r.uri === uri), JSON.stringify(resources.map((r) => r.uri)));
    const read = await client.readResource({ uri });
    assert.equal(JSON.parse((read.contents[0] as { text: string }).text).status, 'succeeded');
    // A missing resource is -32602 naming its uri in this revision (it was -32002 before).
    await assert.rejects(client.readResource({ uri: 'svc://runs/local/r-none' }),
      (err: unknown) => err instanceof ProtocolError && err.code === -32602);

    const audit = (await control.request('GET', '/v1/audit?limit=50')).json.items;
    const row = audit.find((e: { action: string; target: string }) => e.action === 'run.start' && e.target === `local/${started.run}`);
    assert.deepEqual([row?.outcome, row?.detail.via], ['ok', 'mcp']);
    const answered = audit.find((e: { action: string; target: string }) => e.action === 'run.answer' && e.target === `local/${started.run}`);
    assert.deepEqual([answered?.outcome, answered?.detail.via], ['ok', 'mcp']);
    // Closing the subscription closes its stream, and the bus lets go of it; the client's notifications/cancelled
    // (version header, no Mcp-Method) passes the notification checks.
    const errors: unknown[] = [];
    client.onerror = (err) => void errors.push(err);
    await listening.close();
    await waitFor(() => control.deps.bus.size() === streams, 'the listener to leave the bus');
    assert.deepEqual(errors, []);
  });

  /** answer_run without an answer, sent raw: what a client gets that cannot ask its user, or answers the wrong form. */
  async function answerByForm(run: string, question: string): Promise<void> {
    const call = (capabilities: Record<string, unknown>, extra: Record<string, unknown> = {}) => post(control.url, {
      jsonrpc: '2.0', id: 11, method: 'tools/call',
      params: { name: 'answer_run', arguments: { run }, ...extra, _meta: meta(REVISION, capabilities) },
    }, headersFor('tools/call', REVISION, 'answer_run'));
    // No elicitation: the route's own refusal, as a tool error; nothing answered.
    const plain = await call({});
    assert.deepEqual([plain.json.result.resultType, plain.json.result.isError], ['complete', true], plain.text);
    assert.match(plain.json.result.content[0].text, /answer/);
    // A client that can ask gets the question back as input_required, the form naming what it wants.
    const form = await call({ elicitation: {} });
    const { resultType, inputRequests, requestState } = form.json.result;
    assert.equal(resultType, 'input_required', form.text);
    assert.equal(inputRequests.answer.method, 'elicitation/create');
    assert.equal(inputRequests.answer.params.message, `Run local/${run} asks: ${question}`);
    assert.deepEqual(inputRequests.answer.params.requestedSchema.required, ['answer']);
    // A form filled in for another question (its requestState differs) answers nothing: the question is asked again.
    const accepted = { answer: { action: 'accept', content: { answer: 'sqlite' } } };
    const stale = await call({ elicitation: {} }, { inputResponses: accepted, requestState: 'another-question' });
    assert.deepEqual([stale.json.result.resultType, stale.json.result.requestState], ['input_required', requestState]);
    // A declined form is no answer: the route refuses the call as it would any call without one.
    const declined = { answer: { action: 'decline' } };
    const refused = await call({ elicitation: {} }, { inputResponses: declined, requestState });
    assert.equal(refused.json.result.isError, true, refused.text);
    assert.equal((await value('get_run', { run })).status, 'blocked');
  }

  it('a form filled in for one run never answers another run asking the same question', async () => {
    const call = (run: string, extra: Record<string, unknown> = {}) => post(control.url, {
      jsonrpc: '2.0', id: 12, method: 'tools/call',
      params: { name: 'answer_run', arguments: { run }, ...extra, _meta: meta(REVISION, { elicitation: {} }) },
    }, headersFor('tools/call', REVISION, 'answer_run'));
    // One run at a time (a repository runs one): the first asks, its form is shown, then it is stopped.
    const one = await value('start_run', { brief: 'migrate', repo: repo.repo, provider: 'ask' });
    await settled(one.run, 'blocked');
    const stateOfOne = (await call(one.run)).json.result.requestState;
    await value('stop_run', { run: one.run });
    await settled(one.run, 'stopped');
    const two = await value('start_run', { brief: 'migrate', repo: repo.repo, provider: 'ask' });
    await settled(two.run, 'blocked');
    const accepted = { answer: { action: 'accept', content: { answer: 'sqlite' } } };
    const crossed = await call(two.run, { inputResponses: accepted, requestState: stateOfOne });
    assert.equal(crossed.json.result.resultType, 'input_required', crossed.text);
    assert.notEqual(crossed.json.result.requestState, stateOfOne);
    assert.equal((await value('get_run', { run: two.run })).status, 'blocked');
    await value('stop_run', { run: two.run });
  });

  it("a client that negotiates ('auto') gets this revision; an old client still initializes", async () => {
    const auto = await connect(control.url, 'auto');
    assert.equal(auto.client.getNegotiatedProtocolVersion(), REVISION);
    assert.equal(auto.transport.sessionId, undefined);
    await auto.client.close();
    const legacy = new Client({ name: 'svc-test-legacy', version: '2.0.0' });
    const legacyTransport = new StreamableHTTPClientTransport(new URL('/mcp', control.url), { requestInit: { headers: BEARER } });
    await legacy.connect(legacyTransport);
    assert.equal(legacy.getNegotiatedProtocolVersion(), '2025-11-25');
    assert.ok(legacyTransport.sessionId);
    assert.ok((await legacy.listTools()).tools.some((t) => t.name === 'start_run'));
    await legacy.close();
  });

  it('refuses a version it does not speak with UnsupportedProtocolVersion, naming the ones it does', async () => {
    // A client pinned to a version the server lacks is told which ones it has, and gives up (it may not fall back).
    await assert.rejects(connect(control.url, { pin: '2099-01-01' }), (err: unknown) =>
      err instanceof UnsupportedProtocolVersionError && err.supported.includes(REVISION) && err.requested === '2099-01-01');
    const res = await post(control.url, request('tools/list', {}, '2099-01-01'), headersFor('tools/list', '2099-01-01'));
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.error.code, -32022);
    assert.deepEqual(res.json.error.data, { supported: [REVISION, '2025-11-25', '2025-06-18'], requested: '2099-01-01' });
  });

  describe('hostile requests on the stateless path', () => {
    function assertRpcRefusal(res: RawResponse, code: number): void {
      assert.equal(res.status, 400, res.text);
      assert.deepEqual([res.json.jsonrpc, res.json.id, res.json.error.code], ['2.0', 11, code], res.text);
    }
    function runsNow(): number {
      return control.deps.stores.runs.list({ limit: 500 }).length;
    }

    it('answers a well-formed raw request with resultType, cache hints and the server in _meta', async () => {
      const res = await post(control.url, request('tools/list'), headersFor('tools/list'));
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['mcp-session-id'], undefined);
      const { resultType, ttlMs, cacheScope, _meta } = res.json.result;
      assert.deepEqual([resultType, ttlMs, cacheScope], ['complete', 0, 'private']);
      assert.equal(_meta['io.modelcontextprotocol/serverInfo'].name, 'svc');
      // A resource URI that is not a plain header value travels base64-encoded in Mcp-Name.
      const uri = 'svc://runs/local/r-nöne';
      const encoded = `=?base64?${Buffer.from(uri).toString('base64')}?=`;
      const read = await post(control.url, request('resources/read', { uri }), headersFor('resources/read', REVISION, encoded));
      // Past the header checks (those are 400): the handler's own answer, a run name it refuses.
      assert.deepEqual([read.status, read.json.error?.code], [200, -32602], read.text);
      assert.match(read.json.error.message, /run/);
      const other = request('resources/read', { uri: 'svc://runs/local/r-none' });
      assert.equal((await post(control.url, other, headersFor('resources/read', REVISION, encoded))).status, 400);
    });

    it('refuses a header that disagrees with the body (-32020), running nothing', async () => {
      const runs = runsNow();
      const start = request('tools/call', { name: 'start_run', arguments: { brief: 'x', repo: repo.repo, provider: 'fake' } });
      // The method header names a read while the body starts a run: an intermediary would route it as a read.
      assertRpcRefusal(await post(control.url, start, headersFor('tools/list')), -32020);
      assertRpcRefusal(await post(control.url, start, headersFor('tools/call', REVISION, 'get_run')), -32020);
      assertRpcRefusal(await post(control.url, start, headersFor('tools/call')), -32020);
      const { 'mcp-method': _dropped, ...noMethod } = headersFor('tools/call', REVISION, 'start_run');
      assertRpcRefusal(await post(control.url, start, noMethod), -32020);
      assertRpcRefusal(await post(control.url, start, headersFor('tools/call', '2025-11-25', 'start_run')), -32020);
      const { 'mcp-protocol-version': _none, ...noVersion } = headersFor('tools/call', REVISION, 'start_run');
      assertRpcRefusal(await post(control.url, start, noVersion), -32020);
      const read = request('resources/read', { uri: 'svc://runs/local/a' });
      assertRpcRefusal(await post(control.url, read, headersFor('resources/read', REVISION, 'svc://runs/local/b')), -32020);
      assert.equal(runsNow(), runs);
    });

    it('checks a notification\'s headers as a request\'s: one that disagrees with the body is 400 -32020, without an id', async () => {
      const cancel = notification('notifications/cancelled', { requestId: 'listen:0' });
      const { 'mcp-method': _m, ...versionOnly } = headersFor('notifications/cancelled');
      // What the official client sends: the version header, no Mcp-Method (the revision asks that of requests).
      assert.deepEqual([(await post(control.url, cancel, versionOnly)).status], [202]);
      assert.equal((await post(control.url, cancel, headersFor('notifications/cancelled'))).status, 202);
      const refusals: Array<[Record<string, string>, number]> = [
        [headersFor('tools/call'), -32020],
        [headersFor('notifications/cancelled', '2025-11-25'), -32020],
        [{ ...BEARER, 'mcp-method': 'notifications/cancelled' }, -32020],
      ];
      for (const [headers, code] of refusals) {
        const res = await post(control.url, cancel, headers);
        assert.equal(res.status, 400, res.text);
        assert.deepEqual(res.json, { jsonrpc: '2.0', error: { code, message: res.json.error.message } });
      }
      const future = notification('notifications/cancelled', { requestId: 1 }, '2099-01-01');
      const unsupported = await post(control.url, future, headersFor('notifications/cancelled', '2099-01-01'));
      assert.deepEqual([unsupported.status, unsupported.json.error.code], [400, -32022]);
      const bare = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } };
      const noEnvelope = await post(control.url, bare, headersFor('notifications/cancelled'));
      assert.deepEqual([noEnvelope.status, noEnvelope.json.error.code], [400, -32602]);
    });

    it('refuses a JSON-RPC response, which a client of this revision never sends (400, -32600)', async () => {
      for (const response of [{ jsonrpc: '2.0', id: 3, result: {} }, { jsonrpc: '2.0', id: 3, error: { code: 1, message: 'x' } }]) {
        const res = await post(control.url, response, { ...BEARER, 'mcp-protocol-version': REVISION });
        assert.equal(res.status, 400, res.text);
        assert.deepEqual([res.json.id, res.json.error.code], [undefined, -32600]);
      }
    });

    it('keeps subscriptions/listen to the token, Origin and Accept rules; with nothing to watch it ends at once', async () => {
      const listen = request('subscriptions/listen', { notifications: { resourceSubscriptions: ['svc://runs/local/r-none'], toolsListChanged: true } });
      const headers = headersFor('subscriptions/listen');
      const { authorization: _a, ...anonymous } = headers;
      assert.equal((await post(control.url, listen, anonymous)).status, 401);
      assert.equal((await post(control.url, listen, { ...headers, origin: 'https://evil.example' })).status, 403);
      const jsonOnly = await post(control.url, listen, { ...headers, accept: 'application/json' });
      assert.deepEqual([jsonOnly.status, jsonOnly.json.error.code], [400, 'bad_request']);
      const badFilter = await post(control.url, request('subscriptions/listen', { notifications: [] }), headers);
      assert.deepEqual([badFilter.status, badFilter.json.error.code], [200, -32602]);
      const tooMany = Array.from({ length: 101 }, (_, i) => `svc://runs/local/r${i}`);
      const flood = await post(control.url, request('subscriptions/listen', { notifications: { resourceSubscriptions: tooMany } }), headers);
      assert.deepEqual([flood.status, flood.json.error.code], [200, -32602]);
      // Nothing it can watch: the acknowledgement honours nothing, and the listen's result ends the stream.
      const res = await post(control.url, listen, headers);
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /^text\/event-stream/);
      const messages = res.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
      assert.deepEqual(messages.map((m) => [m.method, m.id]), [['notifications/subscriptions/acknowledged', undefined], [undefined, 11]]);
      assert.deepEqual(messages[0].params, { notifications: {}, _meta: { 'io.modelcontextprotocol/subscriptionId': 11 } });
      assert.equal(messages[1].result._meta['io.modelcontextprotocol/subscriptionId'], 11);
    });

    it('refuses a request without its _meta envelope (-32602), and ping, which this revision dropped (404, -32601)', async () => {
      const bare = { jsonrpc: '2.0', id: 11, method: 'tools/list', params: {} };
      assertRpcRefusal(await post(control.url, bare, headersFor('tools/list')), -32602);
      const noCapabilities = request('tools/list');
      delete (noCapabilities.params._meta as Record<string, unknown>)['io.modelcontextprotocol/clientCapabilities'];
      assertRpcRefusal(await post(control.url, noCapabilities, headersFor('tools/list')), -32602);
      // A method this revision does not serve is 404 with -32601; ping left the protocol with it.
      const ping = await post(control.url, request('ping'), headersFor('ping'));
      assert.deepEqual([ping.status, ping.json.error.code], [404, -32601]);
      const unknown = await post(control.url, request('sampling/createMessage'), headersFor('sampling/createMessage'));
      assert.deepEqual([unknown.status, unknown.json.id, unknown.json.error.code], [404, 11, -32601]);
      // Without a session and with no session header, the old era would have said 400 "send initialize first".
      const discover = await post(control.url, request('server/discover'), headersFor('server/discover'));
      assert.equal(discover.json.result.resultType, 'complete');
      assert.equal(discover.json.result.serverInfo.name, 'svc');
    });

    it('keeps the /v1 checks: no token is 401, a foreign Origin 403, a rebound Host 403, before anything runs', async () => {
      const runs = runsNow();
      const start = request('tools/call', { name: 'start_run', arguments: { brief: 'x', repo: repo.repo, provider: 'fake' } });
      const headers = headersFor('tools/call', REVISION, 'start_run');
      const { authorization: _a, ...anonymous } = headers;
      const expect = (res: RawResponse, status: number, code: string) => {
        assert.equal(res.status, status, res.text);
        assert.equal(res.json.error.code, code, res.text);
      };
      expect(await post(control.url, start, anonymous), 401, 'unauthorized');
      expect(await post(control.url, start, { ...headers, authorization: 'Bearer nope' }), 401, 'unauthorized');
      expect(await post(control.url, start, { ...headers, origin: 'https://evil.example' }), 403, 'forbidden_origin');
      const port = new URL(control.url).port;
      const rebound = { ...headers, host: `evil.example:${port}`, origin: `http://evil.example:${port}` };
      expect(await post(control.url, start, rebound), 403, 'forbidden_host');
      assert.equal(runsNow(), runs);
      await assert.rejects(new Client({ name: 'anon', version: '0' }, { versionNegotiation: { mode: { pin: REVISION } } })
        .connect(new StreamableHTTPClientTransport(new URL('/mcp', control.url))));
    });
  });
});

describe('MCP subscriptions/listen (2026-07-28) under the /v1 event-stream limits, through the official v2 client', () => {
  let cp: TestControl;
  const uri = 'svc://runs/local/r000000';
  before(async () => {
    cp = await startTestControl({ token: TOKEN, settings: { streams: { total: 3, perRun: 1 } } });
    for (const i of [0, 1]) cp.deps.stores.runs.upsert('local', makeRun(i, { status: 'running' }));
  });
  let closed = false;
  after(async () => {
    if (!closed) await cp.close();
  });

  /** An event of the run, stored and published as the Control Plane does when it appends one. */
  function eventOf(run: string): void {
    cp.deps.bus.publish([cp.deps.stores.events.append('local', run, { kind: 'log', data: { text: 'x' }, ts: Date.now() })]);
  }

  it("tells a listener when its run changes, bounds listeners like /v1 streams, ends with the listen's result at shutdown", async () => {
    const { client } = await connect(cp.url);
    const updates: string[] = [];
    client.setNotificationHandler('notifications/resources/updated', (n) => void updates.push(n.params.uri));
    const first = await client.listen({ resourceSubscriptions: [uri] });
    assert.equal(cp.deps.bus.size(), 1);
    // The run's own bound (1 here) holds for listeners and /v1 streams together: refused before any stream opens.
    await assert.rejects(client.listen({ resourceSubscriptions: [uri] }), /too_many_requests/);
    const api = await cp.request('GET', '/v1/runs/local/r000000/stream');
    assert.deepEqual([api.status, api.headers.get('retry-after')], [429, '30']);

    eventOf('r000001');
    eventOf('r000000');
    await waitFor(() => updates.length > 0, 'an update');
    assert.deepEqual(updates, [uri], 'only the watched run, once for its one event');

    await first.close();
    await waitFor(() => cp.deps.bus.size() === 0, 'the closed listener to leave the bus');
    const second = await client.listen({ resourceSubscriptions: [uri] });
    closed = true;
    await cp.close();
    assert.equal(await second.closed, 'graceful');
    await client.close();
  });
});
