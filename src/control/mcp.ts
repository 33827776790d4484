// The Control Plane's MCP endpoint at /mcp, in both eras of docs/mcp.md: stateless 2026-07-28, and the sessions of
// 2025-11-25 / 2025-06-18 (in memory, holding no authority). The tools are mcp-tools.ts.
import { hash, randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Ctx, Handler } from '../http/pipeline.ts';
import { HttpError, httpErrorOf } from '../http/http-error.ts';
import { TAKEN_OVER, type Reply } from '../http/respond.ts';
import { openSse } from '../http/sse.ts';
import { errorMessage } from '../errors.ts';
import { isJsonObject, type Obj } from '../json-value.ts';
import { list, obj } from '../untrusted.ts';
import type { ControlDeps } from './deps.ts';
import { JsonRpcError, readMessage, RPC, rpcError, rpcResult, type Id, type Message } from './json-rpc.ts';
import { createMcpTools, type McpTools } from './mcp-tools.ts';
import { route, type DocumentedRoute } from './openapi.ts';
import { VERSION } from '../version.ts';

type C = Ctx<ControlDeps>;

/** The session era's versions, newest first: an `initialize` naming another gets the newest (lifecycle §2). */
const MCP_PROTOCOL_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18'];
const MCP_STATELESS_VERSIONS: readonly string[] = ['2026-07-28'];
const SUPPORTED_VERSIONS = [...MCP_STATELESS_VERSIONS, ...MCP_PROTOCOL_VERSIONS];
const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const META_SERVER = 'io.modelcontextprotocol/serverInfo';
const META_SUBSCRIPTION = 'io.modelcontextprotocol/subscriptionId';
const MAX_LISTEN_URIS = 100;
/** The body field an Mcp-Name header mirrors, per method (transports 2026-07-28, "Standard Request Headers"). */
const NAME_FIELD: Readonly<Record<string, string>> = { 'tools/call': 'name', 'resources/read': 'uri' };
/** Results a 2026-07-28 client may cache: ttlMs 0 and cacheScope private (runs change, tokens differ). */
const CACHEABLE = new Set(['server/discover', 'tools/list', 'resources/list', 'resources/templates/list',
  'resources/read']);
const SESSION_HEADER = 'mcp-session-id';
const VERSION_HEADER = 'mcp-protocol-version';
/** Past this the least recently used session ends (its client gets 404 and initializes again). */
const MAX_SESSIONS = 256;
const RUN_URI = /^svc:\/\/runs\/([^/]+)\/([^/]+)$/;

const INSTRUCTIONS = 'svc runs coding agents on this machine and checks their work. list_runs and get_run show ' +
  'runs; start_run starts one in a registered project; a run that asks a question is blocked until answer_run. ' +
  "get_run_diff and get_run_receipt read a finished run's patch and signed Evidence Receipt.";

/** Each server's live session ids, least recently used first. */
const sessionsOf = new WeakMap<ControlDeps, Set<string>>();

function sessions(deps: ControlDeps): Set<string> {
  let ids = sessionsOf.get(deps);
  if (!ids) sessionsOf.set(deps, (ids = new Set()));
  return ids;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The live session the request names; 400 without one, 404 for one that ended. */
function sessionOf(ctx: C): string {
  const id = header(ctx.req, SESSION_HEADER);
  if (id === undefined) throw new HttpError('bad_request', 'Mcp-Session-Id header is required; send initialize first');
  const ids = sessions(ctx.deps);
  if (!ids.delete(id)) throw new HttpError('not_found', 'No such MCP session (it ended); send initialize again');
  ids.add(id);
  return id;
}

function checkAccept(req: IncomingMessage, type = 'application/json'): void {
  const accept = header(req, 'accept');
  if (accept === undefined) return;
  const types = accept.split(',').map((part) => part.split(';')[0]!.trim().toLowerCase());
  if (!types.some((t) => t === type || t === `${type.split('/')[0]}/*` || t === '*/*')) {
    throw new HttpError('bad_request', `Accept must allow ${type} (the type of this answer)`);
  }
}

const SERVER_INFO = { name: 'svc', title: 'svc Control Plane', version: VERSION };

function initialize(ctx: C, id: Id, params: Obj): Reply {
  const asked = params.protocolVersion;
  if (typeof asked !== 'string') throw new JsonRpcError(RPC.INVALID_PARAMS, '"protocolVersion" must be a string');
  const spoken = MCP_PROTOCOL_VERSIONS.includes(asked) ? asked : MCP_PROTOCOL_VERSIONS[0]!;
  const ids = sessions(ctx.deps);
  if (ids.size >= MAX_SESSIONS) ids.delete(ids.values().next().value!);
  const session = randomUUID();
  ids.add(session);
  const result = {
    protocolVersion: spoken,
    capabilities: { tools: { listChanged: false }, resources: { listChanged: false } },
    serverInfo: SERVER_INFO,
    instructions: INSTRUCTIONS,
  };
  return rpcResult(id, result, { [SESSION_HEADER]: session });
}

/** A refused read (the API's HttpError) as the JSON-RPC error MCP gives resources. */
function resourceError(err: unknown): never {
  const known = httpErrorOf(err);
  if (!known) throw err;
  if (known.code === 'not_found') throw new JsonRpcError(RPC.RESOURCE_NOT_FOUND, known.message);
  throw new JsonRpcError(known.code === 'invalid_param' ? RPC.INVALID_PARAMS : RPC.INTERNAL_ERROR, known.message);
}

async function listResources(ctx: C, tools: McpTools, params: Obj) {
  const cursor = params.cursor;
  if (cursor !== undefined && typeof cursor !== 'string') throw new JsonRpcError(RPC.INVALID_PARAMS, 'Bad cursor');
  const page = await tools.read(ctx, 'list_runs', cursor === undefined ? {} : { cursor }).catch(resourceError);
  const { items, next_cursor: next } = page as { items: Array<Record<string, string | null>>; next_cursor: unknown };
  const resources = items.map((r) => ({
    uri: `svc://runs/${r.source}/${r.run}`, name: `${r.source}/${r.run}`, title: r.brief ?? r.run,
    description: `${r.status}${r.repo ? ` in ${r.repo}` : ''}`, mimeType: 'application/json',
  }));
  return { resources, ...(typeof next === 'string' ? { nextCursor: next } : {}) };
}

async function readResource(ctx: C, tools: McpTools, params: Obj) {
  const match = typeof params.uri === 'string' ? RUN_URI.exec(params.uri) : null;
  if (!match) throw new JsonRpcError(RPC.INVALID_PARAMS, 'Resource URI must be svc://runs/<source>/<run>');
  const detail = await tools.read(ctx, 'get_run', { source: match[1], run: match[2] }).catch(resourceError);
  return { contents: [{ uri: params.uri, mimeType: 'application/json', text: JSON.stringify(detail) }] };
}

const RUN_TEMPLATE = {
  uriTemplate: 'svc://runs/{source}/{run}', name: 'run', title: 'A run',
  description: 'One run as get_run shows it (Run JSON with artifacts, pending answer and attempts)',
  mimeType: 'application/json',
};

async function dispatch(ctx: C, tools: McpTools, method: string, params: Obj): Promise<unknown> {
  switch (method) {
    case 'ping':
      return {};
    case 'tools/list':
      return { tools: tools.list() };
    case 'tools/call': {
      const name = params.name;
      if (typeof name !== 'string') throw new JsonRpcError(RPC.INVALID_PARAMS, '"name" must be a string');
      const tool = tools.find(name);
      if (!tool) throw new JsonRpcError(RPC.INVALID_PARAMS, `Unknown tool: ${name.slice(0, 64)}`);
      const args = params.arguments ?? {};
      if (!isJsonObject(args)) throw new JsonRpcError(RPC.INVALID_PARAMS, '"arguments" must be an object');
      return tools.call(ctx, tool, args);
    }
    case 'resources/list':
      return listResources(ctx, tools, params);
    case 'resources/templates/list':
      return { resourceTemplates: [RUN_TEMPLATE] };
    case 'resources/read':
      return readResource(ctx, tools, params);
    default:
      throw new JsonRpcError(RPC.METHOD_NOT_FOUND, `Method not found: ${method.slice(0, 64)}`);
  }
}

function isStateless(req: IncomingMessage, message: Message): boolean {
  if (message.kind !== 'response' && typeof obj(message.params._meta)[META_VERSION] === 'string') return true;
  const version = header(req, VERSION_HEADER);
  return version !== undefined && version >= MCP_STATELESS_VERSIONS.at(-1)!;
}

/** An Mcp-Name value as sent: plain, or `=?base64?…?=`. */
function decodeHeaderValue(value: string): string {
  const match = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value);
  return match ? Buffer.from(match[1]!, 'base64').toString('utf8') : value;
}

/** Revision 2026-07-28's checks before dispatch (docs/mcp.md); a notification may leave Mcp-Method out. */
function checkStateless(req: IncomingMessage, id: Id | undefined, method: string, params: Obj): void {
  const meta = obj(params._meta);
  const claimed = meta[META_VERSION];
  const refuse = (code: number, why: string, data?: unknown): never => {
    throw new JsonRpcError(code, why, id, 400, data);
  };
  if (typeof claimed !== 'string') refuse(RPC.INVALID_PARAMS, `params._meta must carry "${META_VERSION}"`);
  const version = claimed as string;
  if (header(req, VERSION_HEADER) !== version) {
    refuse(RPC.HEADER_MISMATCH, `MCP-Protocol-Version header must equal _meta "${META_VERSION}"`);
  }
  if (!MCP_STATELESS_VERSIONS.includes(version)) {
    const data = { supported: SUPPORTED_VERSIONS, requested: version };
    refuse(RPC.UNSUPPORTED_VERSION, `Unsupported protocol version: ${version.slice(0, 64)}`, data);
  }
  const capabilities = meta[META_CAPABILITIES];
  if (!isJsonObject(capabilities)) refuse(RPC.INVALID_PARAMS, `params._meta must carry "${META_CAPABILITIES}"`);
  const sentMethod = header(req, 'mcp-method');
  if (sentMethod !== method && (id !== undefined || sentMethod !== undefined)) {
    refuse(RPC.HEADER_MISMATCH, 'Mcp-Method header must equal the body\'s method');
  }
  const field = Object.hasOwn(NAME_FIELD, method) ? NAME_FIELD[method]! : undefined;
  const named = field === undefined ? undefined : params[field];
  if (typeof named !== 'string') return;
  const sent = header(req, 'mcp-name');
  if (sent === undefined || decodeHeaderValue(sent) !== named) {
    refuse(RPC.HEADER_MISMATCH, `Mcp-Name header must equal the body's params.${field}`);
  }
}

const ANSWER_FORM = {
  type: 'object', required: ['answer'],
  properties: { answer: { type: 'string', title: 'Answer', description: 'What the agent will read' } },
};

/**
 * answer_run without an answer, from a client that can show a form: an input_required result asks the run's question
 * (docs/mcp.md "Asking the user"). Undefined: the tool runs as called.
 */
async function elicitAnswer(ctx: C, tools: McpTools, params: Obj): Promise<Obj | undefined> {
  const args = params.arguments;
  const elicit = obj(obj(params._meta)[META_CAPABILITIES]).elicitation;
  if (params.name !== 'answer_run' || !isJsonObject(args) || args.answer !== undefined || !isJsonObject(elicit)) return;
  if (Object.keys(elicit).length > 0 && !isJsonObject(elicit.form)) return;
  const run = await tools.read(ctx, 'get_run', args).catch(() => undefined);
  if (!isJsonObject(run) || run.status !== 'blocked' || typeof run.question !== 'string') return;
  // The question event itself, not only its text: a run asking "Proceed?" again is asked a new question.
  const { source, run: name } = run as { source: string; run: string };
  const question = ctx.deps.stores.events.latest(source, name, 'question');
  const asked = hash('sha256', JSON.stringify([source, name, question?.id ?? null, run.question]), 'base64url');
  const form = obj(params.inputResponses).answer;
  if (params.requestState === asked && isJsonObject(form)) {
    if (form.action === 'accept' && isJsonObject(form.content)) args.answer = form.content.answer;
    return;
  }
  const message = `Run ${source}/${name} asks: ${run.question}`;
  const ask = { method: 'elicitation/create', params: { mode: 'form', message, requestedSchema: ANSWER_FORM } };
  return { resultType: 'input_required', inputRequests: { answer: ask }, requestState: asked };
}

async function answerStateless(ctx: C, tools: McpTools, id: Id, method: string, params: Obj) {
  let result: unknown;
  if (method === 'server/discover') {
    const capabilities = { tools: {}, resources: { subscribe: true } };
    result = {
      supportedVersions: SUPPORTED_VERSIONS, capabilities, serverInfo: SERVER_INFO, instructions: INSTRUCTIONS,
    };
  } else if (method === 'ping') {
    throw new JsonRpcError(RPC.METHOD_NOT_FOUND, 'Method not found: ping (not part of revision 2026-07-28)', id, 404);
  } else {
    result = (method === 'tools/call' ? await elicitAnswer(ctx, tools, params) : undefined) ??
      await dispatch(ctx, tools, method, params).catch((err: unknown) => {
        if (err instanceof JsonRpcError && err.rpcCode === RPC.METHOD_NOT_FOUND) {
          throw new JsonRpcError(RPC.METHOD_NOT_FOUND, err.message, id, 404);
        }
        if (err instanceof JsonRpcError && err.rpcCode === RPC.RESOURCE_NOT_FOUND) {
          throw new JsonRpcError(RPC.INVALID_PARAMS, err.message, id, 200, { uri: params.uri });
        }
        throw err;
      });
  }
  const cache = CACHEABLE.has(method) ? { ttlMs: 0, cacheScope: 'private' } : {};
  return { resultType: 'complete', ...(result as Obj), ...cache, _meta: { [META_SERVER]: SERVER_INFO } };
}

/** subscriptions/listen (docs/mcp.md): each run a subscriber of the bus /v1 streams use, under their limits. */
function listen(ctx: C, id: Id, params: Obj): typeof TAKEN_OVER {
  checkAccept(ctx.req, 'text/event-stream');
  const filter = params.notifications;
  if (!isJsonObject(filter)) throw new JsonRpcError(RPC.INVALID_PARAMS, '"notifications" must be an object');
  const uris = list(filter.resourceSubscriptions);
  if (uris.length > MAX_LISTEN_URIS) {
    throw new JsonRpcError(RPC.INVALID_PARAMS, `At most ${MAX_LISTEN_URIS} resourceSubscriptions per listen`);
  }
  // Only stored runs are acknowledged (subscriptions §Ack).
  const runs = new Map<string, { source: string; run: string }>();
  for (const uri of uris) {
    const [, source, run] = (typeof uri === 'string' && RUN_URI.exec(uri)) || [];
    if (source && run && ctx.deps.stores.runs.get(source, run)) runs.set(uri as string, { source, run });
  }
  const tag = { [META_SUBSCRIPTION]: id };
  const frame = (message: Obj): string => `data: ${JSON.stringify({ jsonrpc: '2.0', ...message })}\n\n`;
  let stream: ReturnType<typeof openSse> | undefined;
  let ended = false;
  const end = (): void => {
    ended = true;
    if (!stream || stream.closed) return;
    const _meta = { ...tag, [META_SERVER]: SERVER_INFO };
    stream.write(frame({ id, result: { resultType: 'complete', _meta } }));
    stream.close();
  };
  const unsubscribe: Array<() => void> = [];
  const unsubscribeAll = (): void => unsubscribe.forEach((off) => off());
  try {
    for (const [uri, scope] of runs) {
      const updated = frame({ method: 'notifications/resources/updated', params: { uri, _meta: tag } });
      unsubscribe.push(ctx.deps.bus.subscribe({ ...scope, deliver: () => stream?.write(updated), end }));
    }
  } catch (err) {
    unsubscribeAll();
    throw err;
  }
  stream = openSse(ctx.res);
  stream.onClose(unsubscribeAll);
  const notifications = runs.size > 0 ? { resourceSubscriptions: [...runs.keys()] } : {};
  stream.write(frame({ method: 'notifications/subscriptions/acknowledged', params: { notifications, _meta: tag } }));
  if (ended || runs.size === 0) end();
  return TAKEN_OVER;
}

function postMcp(tools: McpTools): Handler<ControlDeps> {
  return async (ctx) => {
    checkAccept(ctx.req);
    let id: Id | undefined;
    try {
      const message = readMessage(ctx.body);
      if (message.kind === 'request') id = message.id;
      if (isStateless(ctx.req, message)) {
        if (message.kind === 'response') {
          throw new JsonRpcError(RPC.INVALID_REQUEST, 'Clients send no responses', id, 400);
        }
        checkStateless(ctx.req, id, message.method, message.params);
        if (message.kind === 'notification') return { status: 202 };
        if (message.method === 'subscriptions/listen') return listen(ctx, message.id, message.params);
        return rpcResult(message.id, await answerStateless(ctx, tools, message.id, message.method, message.params));
      }
      if (message.kind === 'request' && message.method === 'initialize') {
        return initialize(ctx, message.id, message.params);
      }
      sessionOf(ctx);
      const version = ctx.req.headers[VERSION_HEADER];
      if (version !== undefined && (typeof version !== 'string' || !MCP_PROTOCOL_VERSIONS.includes(version))) {
        throw new HttpError('bad_request', `MCP-Protocol-Version must be one of ${MCP_PROTOCOL_VERSIONS.join(', ')}`);
      }
      if (message.kind !== 'request') return { status: 202 };
      return rpcResult(message.id, await dispatch(ctx, tools, message.method, message.params));
    } catch (err) {
      if (err instanceof JsonRpcError) return rpcError(err.id ?? id, err.rpcCode, err.message, err.status, err.data);
      // Refusals of the HTTP request itself keep the API's answer.
      if (id === undefined || err instanceof HttpError) throw err;
      ctx.deps.log.error('mcp request failed', { request_id: ctx.requestId, error: errorMessage(err) });
      return rpcError(id, RPC.INTERNAL_ERROR, `Internal error (request ${ctx.requestId})`);
    }
  };
}

const deleteMcp: Handler<ControlDeps> = (ctx) => {
  sessions(ctx.deps).delete(sessionOf(ctx));
  return { status: 204 };
};

/** The /mcp routes over the API's own route table (read lazily: these routes are part of it). */
export function mcpRoutes(routes: () => readonly DocumentedRoute[]): DocumentedRoute[] {
  const tools = createMcpTools(routes);
  return [
    // JSON-RPC: only the HTTP envelope is described here (docs/mcp.md).
    route('POST', '/mcp', postMcp(tools), 'postMcp', 'mcp', 'MCP Streamable HTTP, one JSON-RPC message per POST. ' +
      'Revision 2026-07-28: stateless, each request or notification names its version in _meta and ' +
      'MCP-Protocol-Version / Mcp-Method headers (a mismatch is 400, an unserved method 404, a posted response 400, ' +
      'with a JSON-RPC error); 2025-11-25: initialize answers with an Mcp-Session-Id header that every later ' +
      'message carries', {
      auth: true, body: 'Open',
      ok: {
        status: 200, schema: 'Open', description: 'the JSON-RPC response (application/json); for ' +
          'subscriptions/listen a text/event-stream of notifications (429 past SVC_CONTROL_MAX_STREAMS or _PER_RUN)',
      },
      also: [{ status: 202, type: null, description: 'a notification (or, 2025-11-25, a response), accepted' }],
      errors: ['NotFound', 'TooMany'],
    }),
    route('DELETE', '/mcp', deleteMcp, 'deleteMcp', 'mcp', 'End the MCP session named by Mcp-Session-Id', {
      auth: true, ok: { status: 204, type: null, description: 'the session ended' }, errors: ['NotFound'],
    }),
  ];
}
