import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, ProtocolError, StreamableHTTPClientTransport, UnsupportedProtocolVersionError } from '@modelcontextprotocol/client';
import { startTestControl, stopActiveRuns, type TestControl } from '../helpers/control-server.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeRepo, grantAgentState, ASK_SCRIPT, EDIT_SCRIPT, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';

const TOKEN = 'mcp-2026-test-token-0123456789';
const REVISION = '2026-07-28';
const BEARER = { authorization: `Bearer ${TOKEN}` };

type ToolAnswer = { content: Array<{ type: string; text: string }>; structuredContent?: any; isError?: boolean };

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** The `_meta` envelope every request of this revision carries. */
function meta(version = REVISION) {
  return {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
}
function request(method: string, params: Record<string, unknown> = {}, version = REVISION) {
  return { jsonrpc: '2.0', id: 11, method, params: { ...params, _meta: meta(version) } };
}
function headersFor(method: string, version = REVISION, name?: string): Record<string, string> {
  return { ...BEARER, 'mcp-protocol-version': version, 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) };
}
function post(url: string, body: unknown, headers: Record<string, string>): Promise<RawResponse> {
  return rawRequest(url, '/mcp', { method: 'POST', body: JSON.stringify(body), headers: { ...JSON_HEADERS, ...headers } });
}

/** The official v2 client, pinned to revision 2026-07-28 (no fallback to initialize) unless `mode` says otherwise. */
async function connect(url: string, mode: 'auto' | { pin: string } = { pin: REVISION }) {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: BEARER } });
  const client = new Client({ name: 'svc-test-2026', version: '2.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  return { client, transport };
}

describe('MCP revision 2026-07-28 at /mcp, through the official v2 client (stateless, beside 2025-11-25)', () => {
  let control: TestControl;
  let repo: TestRepo;
  let client: Client;
  let transport: StreamableHTTPClientTransport;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, ask: ASK_SCRIPT } });
    control = await startTestControl({ token: TOKEN, env: { ...GIT_ENV }, projects: [repo.repo] });
    grantAgentState(control.home, JSON.parse(readFileSync(join(repo.repo, '.svc', 'config.json'), 'utf8')).providers);
    ({ client, transport } = await connect(control.url));
  });
  after(async () => {
    await client.close();
    await stopActiveRuns(control);
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
    assert.ok(discovered.capabilities.tools && discovered.capabilities.resources);
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
    assert.equal(blocked.question, 'Which database should the migration target?');
    assert.equal((await value('answer_run', { run: started.run, answer: 'postgres fixed' })).run, started.run);
    const done = await settled(started.run, 'succeeded', 'failed');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const diff = (await client.callTool({ name: 'get_run_diff', arguments: { run: started.run } })) as ToolAnswer;
    assert.match(diff.content[0]!.text, /^\+postgres fixed$/m);

    const uri = `svc://runs/local/${started.run}`;
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
