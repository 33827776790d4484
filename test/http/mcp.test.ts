import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startTestControl, seedRuns, stopActiveRuns, type TestControl } from '../helpers/control-server.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';
import { waitFor } from '../helpers/wait-for.ts';
import {
  makeRepo, grantAgentState, processesEnded, ASK_SCRIPT, EDIT_SCRIPT, SLEEP_SCRIPT, GIT_ENV, type TestRepo,
} from '../engine/fixtures.ts';

const TOKEN = 'mcp-test-token-0123456789';
const PROTOCOL = '2025-11-25';
const TOOLS = [
  'list_runs', 'get_run', 'start_run', 'answer_run', 'stop_run', 'resume_run', 'retry_run', 'verify_run',
  'get_run_diff', 'get_run_events', 'get_run_receipt', 'list_merge_queue', 'add_to_merge_queue', 'run_merge_queue',
];

type ToolAnswer = { content: Array<{ type: string; text: string }>; structuredContent?: any; isError?: boolean };

async function connect(url: string, token: string | null = TOKEN): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } });
  const client = new Client({ name: 'svc-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolAnswer> {
  return (await client.callTool({ name, arguments: args })) as ToolAnswer;
}

/** A tool answer's structured value, failing the test with its text when it is an error the test did not expect. */
async function value(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const answer = await call(client, name, args);
  assert.ok(!answer.isError, `${name}: ${answer.content[0]?.text}`);
  return answer.structuredContent ?? answer.content[0]!.text;
}

function refusalCode(answer: ToolAnswer): string {
  assert.equal(answer.isError, true, answer.content[0]?.text);
  return answer.structuredContent.error.code;
}

describe('MCP server at /mcp, through the official TypeScript SDK client', () => {
  let control: TestControl;
  let repo: TestRepo;
  let client: Client;
  let transport: StreamableHTTPClientTransport;

  before(async () => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT, ask: ASK_SCRIPT, sleepy: SLEEP_SCRIPT } });
    control = await startTestControl({ token: TOKEN, env: { ...GIT_ENV }, projects: [repo.repo] });
    grantAgentState(control.home, JSON.parse(readFileSync(join(repo.repo, '.svc', 'config.json'), 'utf8')).providers);
    ({ client, transport } = await connect(control.url));
  });
  after(async () => {
    await client.close();
    await stopActiveRuns(control);
    await processesEnded(repo.root);
    await control.close();
    repo.cleanup();
  });

  function settled(run: string, ...statuses: string[]) {
    return waitFor(async () => {
      const r = await value(client, 'get_run', { run });
      return statuses.includes(r.status) ? r : null;
    }, `run ${run} to be ${statuses.join(' or ')}`);
  }

  it('negotiates revision 2025-11-25 and names the server', () => {
    assert.equal(transport.protocolVersion, PROTOCOL);
    assert.equal(client.getServerVersion()?.name, 'svc');
    assert.ok(transport.sessionId && /^[\x21-\x7e]+$/.test(transport.sessionId));
    assert.ok(client.getServerCapabilities()?.tools);
    assert.ok(client.getServerCapabilities()?.resources);
  });

  it("lists svc's tools, each with a JSON Schema object input that refuses unknown arguments", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal((tool.inputSchema as { additionalProperties?: unknown }).additionalProperties, false, tool.name);
      assert.ok(tool.description && tool.description.length > 10, tool.name);
    }
    const start = tools.find((t) => t.name === 'start_run')!;
    assert.deepEqual(start.inputSchema.required, ['repo']);
    assert.equal(start.annotations?.readOnlyHint, false);
    assert.equal(tools.find((t) => t.name === 'get_run')!.annotations?.readOnlyHint, true);
  });

  it('starts a run with start_run and reads it, its events, diff and receipt back', async () => {
    const started = await value(client, 'start_run', { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake' });
    assert.equal(started.status, 'queued');
    assert.equal(started.source, 'local');
    const done = await settled(started.run, 'succeeded', 'failed');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    assert.ok(done.artifacts.some((a: { path: string }) => a.path === 'diff.patch'));

    const diff = await call(client, 'get_run_diff', { run: started.run });
    assert.ok(!diff.isError, diff.content[0]!.text);
    assert.match(diff.content[0]!.text, /^\+fixed$/m);
    const receipt = await value(client, 'get_run_receipt', { source: 'local', run: started.run });
    assert.equal(receipt.run, started.run);
    assert.equal(typeof receipt.verdict, 'string');
    const events = await value(client, 'get_run_events', { run: started.run, limit: 500 });
    assert.ok(events.items.some((e: { kind: string }) => e.kind === 'receipt'), JSON.stringify(events.items.map((e: { kind: string }) => e.kind)));

    // The same request the API gets, so the same audit row, saying where it came from.
    const audit = (await control.request('GET', '/v1/audit?limit=50')).json.items;
    const row = audit.find((e: { action: string; target: string }) => e.action === 'run.start' && e.target === `local/${started.run}`);
    assert.ok(row, JSON.stringify(audit));
    assert.deepEqual([row.actor, row.outcome, row.detail.via, row.detail.tool], ['token', 'ok', 'mcp', 'start_run']);
  });

  it("is POST /v1/start's own start: the same request_id and body through either is the same run", async () => {
    const body = { brief: 'append fixed to a.txt', repo: repo.repo, provider: 'fake', request_id: 'mcp-same-1' };
    const started = await value(client, 'start_run', body);
    const replay = await control.request('POST', '/v1/start', { body });
    assert.deepEqual([replay.status, replay.json.run], [200, started.run]);
    const conflict = await call(client, 'start_run', { ...body, brief: 'something else' });
    assert.equal(refusalCode(conflict), 'conflict');
    assert.equal((await value(client, 'start_run', body)).run, started.run);
    await settled(started.run, 'succeeded', 'failed');
  });

  it('answers a blocked run with answer_run and the run finishes with the answer', async () => {
    const started = await value(client, 'start_run', { brief: 'migrate', repo: repo.repo, provider: 'ask' });
    const blocked = await settled(started.run, 'blocked');
    assert.equal(blocked.question, 'Which database should the migration target?');
    const answered = await value(client, 'answer_run', { run: started.run, answer: 'postgres fixed' });
    assert.equal(answered.run, started.run);
    const done = await settled(started.run, 'succeeded', 'failed');
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const diff = await call(client, 'get_run_diff', { run: started.run });
    assert.match(diff.content[0]!.text, /^\+postgres fixed$/m);
  });

  it('refuses an action the run is not in the state for as a tool error with the API code, changing nothing', async () => {
    const [done] = (await value(client, 'list_runs', { status: 'succeeded', limit: 1 })).items;
    const before = control.deps.stores.events.listAll({ source: 'local', run: done.run, after: 0, limit: 500 }).length;
    assert.equal(refusalCode(await call(client, 'answer_run', { run: done.run, answer: 'late' })), 'invalid_transition');
    assert.equal(refusalCode(await call(client, 'stop_run', { run: done.run })), 'invalid_transition');
    assert.equal(control.deps.stores.events.listAll({ source: 'local', run: done.run, after: 0, limit: 500 }).length, before);
    assert.equal(refusalCode(await call(client, 'get_run', { run: 'r-none' })), 'not_found');
  });

  it('stops, resumes, retries and verifies runs through their tools', async () => {
    const started = await value(client, 'start_run', { brief: 'run until stopped', repo: repo.repo, provider: 'sleepy' });
    await waitFor(async () => (await value(client, 'get_run', { run: started.run })).status === 'running', 'sleepy to run');
    const stopping = await value(client, 'stop_run', { run: started.run });
    assert.ok(['stopping', 'stopped'].includes(stopping.status), stopping.status);
    await settled(started.run, 'stopped');
    const resumed = await value(client, 'resume_run', { run: started.run });
    assert.equal(resumed.status, 'running');
    await value(client, 'stop_run', { run: started.run });
    await settled(started.run, 'stopped', 'failed');

    const done = (await value(client, 'list_runs', { status: 'succeeded' })).items.find((r: { provider: string }) => r.provider === 'fake');
    const retried = await value(client, 'retry_run', { run: done.run });
    assert.notEqual(retried.run, done.run);
    assert.equal(retried.group_id, done.group_id);
    await settled(retried.run, 'succeeded', 'failed');
    const verified = await value(client, 'verify_run', { run: done.run });
    assert.equal(verified.run, done.run);
    const actions = (await control.request('GET', '/v1/audit?limit=100')).json.items
      .filter((e: { detail: { via?: string } }) => e.detail.via === 'mcp').map((e: { action: string }) => e.action);
    for (const action of ['run.stop', 'run.resume', 'run.retry', 'run.verify', 'run.answer']) assert.ok(actions.includes(action), action);
  });

  it('pages list_runs with its filters and cursor like GET /v1/runs', async () => {
    seedRuns(control.deps, 3, { repo: 'acme/paged', status: 'failed', verdict: 'not_verified' }, 'laptop');
    const first = await value(client, 'list_runs', { source: 'laptop', repo: 'acme/paged', limit: 2 });
    assert.equal(first.items.length, 2);
    assert.equal(typeof first.next_cursor, 'string');
    const second = await value(client, 'list_runs', { source: 'laptop', repo: 'acme/paged', limit: 2, cursor: first.next_cursor });
    assert.equal(second.items.length, 1);
    assert.equal(second.next_cursor, null);
    const api = (await control.request('GET', '/v1/runs?source=laptop&repo=acme/paged&limit=2')).json;
    assert.deepEqual(first, api);
    assert.equal((await value(client, 'list_runs', { verdict: 'not_verified', source: 'laptop' })).items.length, 3);
    assert.equal(refusalCode(await call(client, 'list_runs', { status: 'sideways' })), 'invalid_param');
  });

  it("shows with get_run a run's attempts from its own source only, like GET /v1/runs/:source/:run", async () => {
    const t = Date.now() - 60_000;
    control.deps.stores.runs.upsert('laptop', { run: 'rchain', status: 'failed', started_at: t });
    control.deps.stores.runs.upsert('elsewhere', { run: 'rjoined', group_id: 'rchain', status: 'succeeded', started_at: t + 1 });
    const run = await value(client, 'get_run', { source: 'laptop', run: 'rchain' });
    assert.deepEqual(run.attempts.map((a: { source: string; run: string }) => `${a.source}/${a.run}`), ['laptop/rchain']);
    assert.deepEqual(run, (await control.request('GET', '/v1/runs/laptop/rchain')).json);
  });

  it('shows the merge queue and refuses to queue a run without a pull request', async () => {
    assert.deepEqual(await value(client, 'list_merge_queue'), { items: [] });
    const [done] = (await value(client, 'list_runs', { status: 'succeeded', limit: 1 })).items;
    assert.equal(refusalCode(await call(client, 'add_to_merge_queue', { source: 'local', run: done.run })), 'conflict');
    assert.deepEqual(await value(client, 'run_merge_queue'), { items: [] });
  });

  it('lists runs as svc://runs resources and reads one', async () => {
    const { resources, nextCursor } = await client.listResources();
    assert.ok(resources.length > 0 && resources.length <= 50);
    assert.equal(typeof nextCursor === 'string' || nextCursor === undefined, true);
    const first = resources[0]!;
    assert.match(first.uri, /^svc:\/\/runs\/[^/]+\/[^/]+$/);
    const read = await client.readResource({ uri: first.uri });
    const content = read.contents[0] as { uri: string; mimeType?: string; text: string };
    assert.equal(content.mimeType, 'application/json');
    assert.equal(`svc://runs/${JSON.parse(content.text).source}/${JSON.parse(content.text).run}`, first.uri);
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), ['svc://runs/{source}/{run}']);
    await assert.rejects(client.readResource({ uri: 'svc://runs/local/r-none' }), (err: unknown) => err instanceof McpError && err.code === -32002);
  });

  describe('security', () => {
    let open: TestControl;
    let publicBind: TestControl;

    before(async () => {
      open = await startTestControl();
      publicBind = await startTestControl({ token: TOKEN, host: '0.0.0.0' });
    });
    after(async () => {
      await open.close();
      await publicBind.close();
    });

    const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

    function post(url: string, body: unknown, headers: Record<string, string> = {}, connectHost?: string): Promise<RawResponse> {
      const text = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
      return rawRequest(url, '/mcp', { method: 'POST', body: text, headers: { ...JSON_HEADERS, ...headers }, ...(connectHost ? { connectHost } : {}) });
    }

    /** A new session on `url`: its id, for the raw requests below. */
    async function session(url: string, auth: Record<string, string> = {}, connectHost?: string): Promise<Record<string, string>> {
      const res = await post(url, INIT, auth, connectHost);
      assert.equal(res.status, 200, res.text);
      return { ...auth, 'mcp-session-id': String(res.headers['mcp-session-id']), 'mcp-protocol-version': PROTOCOL };
    }

    function assertEnvelope(res: RawResponse, status: number, code: string): void {
      assert.equal(res.status, status, res.text);
      assert.deepEqual(Object.keys(res.json ?? {}), ['error'], res.text);
      assert.equal(res.json.error.code, code, res.text);
    }

    const BEARER = { authorization: `Bearer ${TOKEN}` };

    it('answers 401 without the token or with a wrong one, to the SDK client too', async () => {
      assertEnvelope(await post(control.url, INIT), 401, 'unauthorized');
      const wrong = await post(control.url, INIT, { authorization: 'Bearer nope' });
      assertEnvelope(wrong, 401, 'unauthorized');
      assert.match(String(wrong.headers['www-authenticate']), /^Bearer/);
      await assert.rejects(connect(control.url, null));
      await assert.rejects(connect(control.url, 'wrong-token'));
    });

    it('answers 403 to a foreign Origin, a cross-site fetch and a rebound Host name, before any session exists', async () => {
      const host = new URL(control.url).host;
      assertEnvelope(await post(control.url, INIT, { ...BEARER, origin: 'https://evil.example' }), 403, 'forbidden_origin');
      assertEnvelope(await post(control.url, INIT, { ...BEARER, 'sec-fetch-site': 'cross-site' }), 403, 'forbidden_origin');
      // DNS rebinding: the attacker's name resolves to 127.0.0.1, so Host and Origin both name it.
      const rebound = { ...BEARER, host: `evil.example:${host.split(':')[1]}`, origin: `http://evil.example:${host.split(':')[1]}` };
      assertEnvelope(await post(control.url, INIT, rebound), 403, 'forbidden_host');
      // The server's own origin is not foreign.
      assert.equal((await post(control.url, INIT, { ...BEARER, origin: `http://${host}` })).status, 200);
    });

    it('answers 415 to a body that is not JSON, 413 past 1 MiB and 400 to malformed JSON or a batch', async () => {
      const auth = await session(control.url, BEARER);
      assertEnvelope(await post(control.url, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...auth, 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      assertEnvelope(await post(control.url, Buffer.alloc(1024 * 1024 + 1, 0x20), auth), 413, 'payload_too_large');
      assertEnvelope(await post(control.url, '{"jsonrpc":"2.0","id":1,', auth), 400, 'invalid_json');
      assertEnvelope(await post(control.url, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], auth), 400, 'bad_request');
      assertEnvelope(await post(control.url, { jsonrpc: '2.0', method: 5 }, auth), 400, 'bad_request');
      assertEnvelope(await post(control.url, INIT, { ...BEARER, accept: 'text/event-stream' }), 400, 'bad_request');
    });

    it('answers a malformed JSON-RPC request it can name with a JSON-RPC error, and an unknown method with -32601', async () => {
      const auth = await session(control.url, BEARER);
      const wrongVersion = await post(control.url, { jsonrpc: '1.0', id: 7, method: 'ping' }, auth);
      assert.equal(wrongVersion.status, 200);
      assert.deepEqual([wrongVersion.json.id, wrongVersion.json.error.code], [7, -32600]);
      const badParams = await post(control.url, { jsonrpc: '2.0', id: 'x', method: 'tools/list', params: [1] }, auth);
      assert.deepEqual([badParams.json.id, badParams.json.error.code], ['x', -32600]);
      const unknown = await post(control.url, { jsonrpc: '2.0', id: 8, method: 'sampling/createMessage' }, auth);
      assert.deepEqual([unknown.json.id, unknown.json.error.code], [8, -32601]);
      const ping = await post(control.url, { jsonrpc: '2.0', id: 9, method: 'ping' }, auth);
      assert.deepEqual(ping.json, { jsonrpc: '2.0', id: 9, result: {} });
      const note = await post(control.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, auth);
      assert.deepEqual([note.status, note.text], [202, '']);
    });

    it('wants a live session and a protocol version it speaks; DELETE ends the session and GET has no stream', async () => {
      const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
      assertEnvelope(await post(control.url, ping, BEARER), 400, 'bad_request');
      assertEnvelope(await post(control.url, ping, { ...BEARER, 'mcp-session-id': 'made-up' }), 404, 'not_found');
      const auth = await session(control.url, BEARER);
      assertEnvelope(await post(control.url, ping, { ...auth, 'mcp-protocol-version': '1999-01-01' }), 400, 'bad_request');
      assert.equal((await post(control.url, ping, auth)).status, 200);
      const ended = await rawRequest(control.url, '/mcp', { method: 'DELETE', headers: auth });
      assert.equal(ended.status, 204);
      assertEnvelope(await post(control.url, ping, auth), 404, 'not_found');
      const get = await rawRequest(control.url, '/mcp', { headers: { ...BEARER, accept: 'text/event-stream' } });
      assertEnvelope(get, 405, 'method_not_allowed');
      assert.equal(get.headers.allow, 'POST, DELETE');
    });

    it('serves a 2026-07-28 request without a session; its refusals are JSON-RPC errors (test/http/mcp-2026.test.ts)', async () => {
      const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'c', version: '1' } };
      const modern = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } };
      const headers = { ...BEARER, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' };
      // Without the client's capabilities the envelope is incomplete: invalid params, not "send initialize first".
      const res = await post(control.url, modern, headers);
      assert.deepEqual([res.status, res.json.id, res.json.error.code], [400, 1, -32602], res.text);
      const whole = { ...modern, params: { _meta: { ...meta, 'io.modelcontextprotocol/clientCapabilities': {} } } };
      const served = await post(control.url, whole, headers);
      assert.equal(served.status, 200, served.text);
      assert.equal(served.json.result.resultType, 'complete');
    });

    it('ends a session for the SDK client with terminateSession', async () => {
      const { client: other, transport: t } = await connect(control.url);
      await t.terminateSession();
      assert.equal(t.sessionId, undefined);
      await other.close();
    });

    it('refuses hostile tool arguments as tool errors, touching nothing', async () => {
      const runs = control.deps.stores.runs.list({ limit: 500 }).length;
      const audit = (await control.request('GET', '/v1/audit?limit=500')).json.items.length;
      const [known] = (await value(client, 'list_runs', { limit: 1 })).items;
      const outsideSpec = join(mkdtempSync(join(tmpdir(), 'svc-outside-')), 'TASK.md');
      writeFileSync(outsideSpec, '# Read ~/.ssh for me\n');
      const hostile: Array<[string, Record<string, unknown>]> = [
        ['get_run', { run: '../../../etc/passwd' }],
        ['get_run_diff', { run: '..', source: '..' }],
        ['get_run_receipt', { run: 'r1/../../x' }],
        ['get_run', { run: 5 }],
        ['get_run', { run: { toString: 'r1' } }],
        ['get_run', { run: 'r1', extra: true }],
        ['list_runs', { limit: 'ten' }],
        ['list_runs', { limit: 1.5 }],
        ['list_runs', { cursor: ['a'] }],
        ['get_run_events', { run: known.run, after: -1 }],
        ['get_run_events', { run: known.run, after: '1 OR 1=1' }],
        ['start_run', { brief: 'x', repo: '/etc' }],
        ['start_run', { brief: 'x', repo: repo.repo, provider: '../../bin/sh' }],
        ['start_run', { brief: ['x'], repo: repo.repo }],
        ['start_run', { brief: 'x', spec_path: '../../../etc/passwd', repo: repo.repo }],
        // An existing .md file, but outside the repository (POST /v1/start refuses it the same way).
        ['start_run', { spec_path: outsideSpec, repo: repo.repo }],
        ['answer_run', { run: '../r1', answer: 'x' }],
        ['stop_run', { run: 'r1\u0000' }],
      ];
      for (const [name, args] of hostile) {
        const code = refusalCode(await call(client, name, args));
        assert.ok(['invalid_param', 'bad_request'].includes(code), `${name} ${JSON.stringify(args)}: ${code}`);
      }
      rmSync(dirname(outsideSpec), { recursive: true, force: true });
      assert.equal(control.deps.stores.runs.list({ limit: 500 }).length, runs);
      // Refused mutations are audited as the API's are; nothing else was written. An earlier test's run may still ship
      // its last events meanwhile: that is a runner's ingest, not this client's doing.
      const items = (await control.request('GET', '/v1/audit?limit=500')).json.items;
      const rows = items.slice(0, items.length - audit).filter((r: { action: string }) => r.action !== 'runs.ingest');
      assert.ok(rows.every((r: { outcome: string }) => r.outcome !== 'ok'), JSON.stringify(rows));
    });

    it("hands a runner's hostile receipt back as text: not JSON, or nested 100,000 deep, crashes nothing", async () => {
      seedRuns(control.deps, 2, {}, 'hostile');
      const [first, second] = ['r000000', 'r000001'];
      const json = 'application/json';
      control.deps.stores.artifacts.put('hostile', first, { path: 'receipt.json', content_type: json, content: Buffer.from('{"verdict":') });
      const deep = '['.repeat(100_000) + ']'.repeat(100_000);
      control.deps.stores.artifacts.put('hostile', second, { path: 'receipt.json', content_type: json, content: Buffer.from(deep) });
      const broken = await call(client, 'get_run_receipt', { source: 'hostile', run: first });
      assert.deepEqual([broken.isError, broken.content[0]!.text, broken.structuredContent], [undefined, '{"verdict":', undefined]);
      const nested = await call(client, 'get_run_receipt', { source: 'hostile', run: second });
      assert.equal(nested.content[0]!.text, deep);
      assert.equal(nested.structuredContent, undefined);
    });

    it('answers an unknown tool or arguments that are not an object with JSON-RPC -32602', async () => {
      await assert.rejects(client.callTool({ name: 'rm_rf', arguments: {} }), (err: unknown) => err instanceof McpError && err.code === -32602);
      const auth = await session(control.url, BEARER);
      const res = await post(control.url, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get_run', arguments: ['r1'] } }, auth);
      assert.deepEqual([res.json.id, res.json.error.code], [3, -32602]);
    });

    it('keeps loopback-only tools loopback-only: start_run on a public bind is refused and audited', async () => {
      const url = publicBind.url.replace('0.0.0.0', '127.0.0.1');
      const auth = await session(url, BEARER, '127.0.0.1');
      const start = { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'start_run', arguments: { brief: 'x', repo: repo.repo } } };
      const res = await post(url, start, auth, '127.0.0.1');
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.result.isError, true);
      assert.equal(res.json.result.structuredContent.error.code, 'loopback_only');
      assert.equal(publicBind.deps.stores.runs.list({ limit: 10 }).length, 0);
      publicBind.deps.refusals.flush(true);
      const audit = publicBind.deps.stores.audit.list({ limit: 10 }).items;
      const row = audit.find((e) => e.action === 'run.start' && e.outcome === 'loopback_only');
      assert.ok(row, JSON.stringify(audit));
      assert.deepEqual([row.actor, row.detail?.refused_by, row.detail?.tool], ['token', 'mcp', 'start_run']);
    });

    it('refuses a loopback-only tool relayed by a same-host proxy', async () => {
      const auth = await session(open.url);
      const stop = { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'stop_run', arguments: { run: 'r1' } } };
      const res = await post(open.url, stop, { ...auth, 'x-forwarded-for': '203.0.113.7' });
      assert.equal(res.json.result.structuredContent.error.code, 'proxied_request');
    });
  });
});
