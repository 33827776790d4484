// The Control Plane's MCP tools (docs/mcp.md): each is one route of the API, called through that route's own handler,
// so the validation, the audit row, the loopback-only authority and the answer are the API's.
import type { Ctx, Route } from '../http/pipeline.ts';
import { isDatabaseBusy } from '../http/pipeline.ts';
import { checkLoopbackOnly, isLoopbackHost } from '../http/guards.ts';
import { HttpError, errorBody, httpErrorOf, isHttpError } from '../http/http-error.ts';
import { TAKEN_OVER, type Reply } from '../http/respond.ts';
import { jsonDepth, MAX_JSON_DEPTH } from '../http/body.ts';
import { FailedError } from '../errors.ts';
import { isJsonObject, describe as describeValue } from '../untrusted.ts';
import { FAILURE_CLASSES, RUN_STATUSES, VERDICTS } from '../run-json.ts';
import type { ControlDeps } from './deps.ts';
import { noteAudit, recordRefusal } from './audited.ts';
import { SEGMENT } from './params.ts';

type C = Ctx<ControlDeps>;
type R = Route<ControlDeps>;
type Schema = Record<string, unknown>;

interface ToolDef {
  name: string;
  title: string;
  description: string;
  method: 'GET' | 'POST';
  pattern: string;
  /** Where the arguments that are not path parameters go. */
  rest: 'query' | 'body' | 'none';
  properties: Record<string, Schema>;
  required?: string[];
  /** The artifact a file-reading tool serves (the route's `*path`). */
  artifact?: string;
  hints: { readOnlyHint: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

const RUN = '/v1/runs/:source/:run';
const SOURCE = {
  type: 'string', pattern: SEGMENT.source, description: "The run's source (default: this Control Plane's own source)",
};
const RUN_ID = { type: 'string', pattern: SEGMENT.source, description: 'The run id, e.g. r01m8h6m60vvg5jq5rmsxcgyxgw' };
const ON_RUN = { source: SOURCE, run: RUN_ID };
const LIMIT = { type: 'integer', minimum: 1, maximum: 500, description: 'Page size (default 50)' };
const CURSOR = { type: 'string', description: 'next_cursor of the previous page' };
const READ = { readOnlyHint: true, openWorldHint: false } as const;
const ACT = { readOnlyHint: false, destructiveHint: false, openWorldHint: true } as const;

function runAction(name: string, title: string, description: string, hints: Partial<ToolDef['hints']> = {}): ToolDef {
  return {
    name: `${name}_run`, title, description, method: 'POST', pattern: `${RUN}/${name}`, rest: 'none',
    properties: ON_RUN, required: ['run'], hints: { ...ACT, ...hints },
  };
}

function runRead(name: string, title: string, description: string, extra: Partial<ToolDef> = {}): ToolDef {
  return {
    name, title, description, method: 'GET', pattern: RUN, rest: 'none', properties: ON_RUN, required: ['run'],
    hints: READ, ...extra,
  };
}

const TOOLS: readonly ToolDef[] = [
  {
    name: 'list_runs', title: 'List runs', method: 'GET', pattern: '/v1/runs', rest: 'query', hints: READ,
    description: 'Runs newest first, one page at a time (pass next_cursor back as cursor), filtered like GET /v1/runs',
    properties: {
      status: { type: 'string', enum: [...RUN_STATUSES] },
      verdict: { type: 'string', enum: [...VERDICTS, 'none'], description: 'none = no receipt yet' },
      repo: { type: 'string', description: 'Repository name, e.g. acme/api' },
      source: { type: 'string', pattern: SEGMENT.source, description: 'The source that sent the runs' },
      group_id: { type: 'string', pattern: SEGMENT.source, description: 'A retry chain' },
      failure: { type: 'string', enum: [...FAILURE_CLASSES], description: 'Why the run failed (its class)' },
      since: { type: 'string', description: 'Started at or after: ISO-8601 or unix ms' },
      until: { type: 'string', description: 'Started before: ISO-8601 or unix ms' },
      limit: LIMIT, cursor: CURSOR,
    },
  },
  runRead('get_run', 'Show a run', 'One run: status, question, verdict, cost, PR, artifacts, pending answer, ' +
    'retry attempts, and why each action would be refused now'),
  {
    name: 'start_run', title: 'Start a run', method: 'POST', pattern: '/v1/runs', rest: 'body', hints: ACT,
    description: 'Start a coding-agent run in a registered project on this machine (exactly one of brief, spec_path ' +
      'or issue_url); the same request_id with the same arguments returns the same run',
    properties: {
      brief: { type: 'string', description: 'What to do, in words' },
      spec_path: { type: 'string', description: 'A .md spec or .json export inside the repository' },
      issue_url: { type: 'string', description: 'An error-tracker issue URL (…/issues/<id>)' },
      repo: { type: 'string', description: 'Absolute path of the repository (a registered project)' },
      provider: { type: 'string', description: 'Coding agent, e.g. claude, codex, gemini (default: the setting)' },
      pr: { type: 'boolean', description: 'Open a draft pull request when the run is verified' },
      request_id: { type: 'string', description: 'Idempotency key: 1-128 letters, digits, ".", "_", ":" or "-"' },
    },
    required: ['repo'],
  },
  {
    name: 'answer_run', title: 'Answer a blocked run', method: 'POST', pattern: `${RUN}/answer`, rest: 'body',
    description: "Answer the question a blocked run asked (see get_run's question); refused unless it is blocked",
    properties: {
      ...ON_RUN,
      answer: {
        type: 'string', description: 'The answer, as the agent will read it; left out, a client that can ask its ' +
          'user (elicitation, revision 2026-07-28) is asked for it with the question',
      },
    },
    required: ['run'], hints: ACT,
  },
  runAction('stop', 'Stop a run', 'Stop a queued, running or blocked run (it goes stopping, then stopped)', {
    destructiveHint: true, idempotentHint: true,
  }),
  runAction('resume', 'Resume a run', 'Resume a stopped or failed run in its worktree'),
  runAction('retry', 'Retry a run', 'Start a new run with the same brief in the same retry group'),
  runAction('verify', 'Verify a run again', 'Re-run the checks and re-issue the Evidence Receipt'),
  runRead('get_run_diff', "Read a run's diff", 'The patch the run made (diff.patch), as text', {
    pattern: `${RUN}/artifact/*path`, artifact: 'diff.patch',
  }),
  runRead('get_run_events', "Read a run's events", 'The run\'s events oldest first, one page at a time', {
    pattern: `${RUN}/events`, rest: 'query',
    properties: {
      ...ON_RUN, after: { type: 'integer', minimum: 0, description: 'Only events after this id' },
      limit: LIMIT, cursor: CURSOR,
    },
  }),
  runRead('get_run_receipt', "Read a run's receipt", 'The signed Evidence Receipt (receipt.json): verdict, ' +
    'checks, diff digest, cost', { pattern: `${RUN}/artifact/*path`, artifact: 'receipt.json' }),
  {
    name: 'list_merge_queue', title: 'Show the merge queue', method: 'GET', pattern: '/v1/merge/queue', rest: 'none',
    description: 'The merge queue in order, with each entry\'s PR, verdict and receipt signer', properties: {},
    hints: READ,
  },
  {
    name: 'add_to_merge_queue', title: 'Queue a run for merging', method: 'POST', pattern: '/v1/merge/queue',
    rest: 'body', description: 'Queue a run whose pull request and receipt the repository policy accepts',
    properties: { source: { ...SOURCE, description: "The run's source" }, run: RUN_ID },
    required: ['source', 'run'], hints: { ...ACT, idempotentHint: true },
  },
  {
    name: 'run_merge_queue', title: 'Merge the queue', method: 'POST', pattern: '/v1/merge/run', rest: 'none',
    description: 'Merge the queued pull requests in order, re-checking each receipt first', properties: {},
    hints: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
  },
];

const PATH_PARAM = /:(\w+)/g;

function refuse(message: string): never {
  throw new HttpError('invalid_param', message);
}

function requestFor(tool: ToolDef, args: Record<string, unknown>, ownSource: string) {
  const params: Record<string, string> = {};
  const query = new URLSearchParams();
  const body: Record<string, unknown> = {};
  for (const key of Object.keys(args)) {
    if (!Object.hasOwn(tool.properties, key)) refuse(`Unknown argument "${key.slice(0, 64)}"`);
  }
  for (const [, name] of tool.pattern.matchAll(PATH_PARAM)) {
    const given = args[name!];
    const value = given === undefined && name === 'source' ? ownSource : given;
    if (typeof value !== 'string') refuse(`Argument "${name}" must be a string, not ${describeValue(value)}`);
    params[name!] = value;
  }
  if (tool.artifact) params.path = tool.artifact;
  for (const [key, value] of Object.entries(args)) {
    if (Object.hasOwn(params, key)) continue;
    if (tool.rest === 'body') body[key] = value;
    else query.set(key, queryValue(key, tool.properties[key]!, value));
  }
  return { params, query, body };
}

function queryValue(key: string, schema: Schema, value: unknown): string {
  if (schema.type === 'integer' && Number.isSafeInteger(value)) return String(value);
  if (schema.type === 'string' && typeof value === 'string') return value;
  return refuse(`Argument "${key}" must be ${schema.type === 'integer' ? 'an integer' : 'a string'}, ` +
    `not ${describeValue(value)}`);
}

/** The reply's body as a value; an artifact (untrusted) that does not parse, or nests too deep, stays text. */
function replyValue(reply: Reply): unknown {
  const body = reply.body;
  if (body === undefined || body === null) return {};
  if (typeof body !== 'string' && !Buffer.isBuffer(body)) return body;
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const text = bytes.toString('utf8');
  const type = Object.entries(reply.headers ?? {}).find(([k]) => k.toLowerCase() === 'content-type')?.[1] ?? '';
  if (!/[/+]json\b/i.test(type) || jsonDepth(bytes) > MAX_JSON_DEPTH) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function result(value: unknown, isError: boolean) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return {
    content: [{ type: 'text', text }],
    ...(isJsonObject(value) ? { structuredContent: value } : {}),
    ...(isError ? { isError: true } : {}),
  };
}

function refusal(err: unknown) {
  const known = isHttpError(err) ? err : httpErrorOf(err);
  if (known) return result(errorBody(known.code, known.message), true);
  if (isDatabaseBusy(err)) {
    return result(errorBody('unavailable', 'The database is busy (another process holds its write lock); try again'),
      true);
  }
  throw err;
}

export type McpTools = ReturnType<typeof createMcpTools>;

export function createMcpTools(routes: () => readonly R[]) {
  let resolved: Map<string, R> | undefined;

  /** A tool naming no route is a bug in svc (a FailedError: a 500 or -32603). */
  function routeOf(tool: ToolDef): R {
    resolved ??= new Map(TOOLS.map((t) => {
      const route = routes().find((r) => r.method === t.method && r.pattern === t.pattern);
      if (!route) throw new FailedError(`MCP tool ${t.name} names no route ${t.method} ${t.pattern}`);
      return [t.name, route];
    }));
    return resolved.get(tool.name)!;
  }

  async function callRoute(ctx: C, tool: ToolDef, args: Record<string, unknown>): Promise<Reply> {
    const route = routeOf(tool);
    let params: Record<string, string> = {};
    let request: ReturnType<typeof requestFor>;
    try {
      request = requestFor(tool, args, ctx.deps.settings.source);
      params = request.params;
      // The API's authority: a loopback-only route is loopback-only here too (main.ts binds by the same rule).
      if (route.loopbackOnly) checkLoopbackOnly(ctx.req, isLoopbackHost(ctx.deps.settings.host));
    } catch (err) {
      // Refused before the handler ran, as the pipeline refuses: audited as the API action (when it is one).
      if (isHttpError(err)) {
        const { req, peer, requestId } = ctx;
        const info = { route, params, method: route.method, req, peer, requestId, error: err };
        recordRefusal(ctx.deps, info, { refused_by: 'mcp', tool: tool.name });
      }
      throw err;
    }
    const path = tool.pattern.replace(/[:*](\w+)/g, (_, name: string) => encodeURIComponent(params[name] ?? ''));
    const query = request.query.size > 0 ? `?${request.query}` : '';
    const inner: C = {
      ...ctx, method: route.method, url: new URL(`http://localhost${path}${query}`), params, query: request.query,
      body: request.body, raw: undefined,
    };
    noteAudit(inner, { via: 'mcp', tool: tool.name });
    const reply = await route.handler(inner);
    if (reply === TAKEN_OVER) throw new FailedError(`MCP tool ${tool.name} reached a streaming route`);
    return reply;
  }

  async function call(ctx: C, tool: ToolDef, args: Record<string, unknown>) {
    try {
      const reply = await callRoute(ctx, tool, args);
      return result(replyValue(reply), reply.status >= 400);
    } catch (err) {
      return refusal(err);
    }
  }

  return {
    list() {
      // A tool naming no route fails tools/list, loudly.
      for (const t of TOOLS) routeOf(t);
      return TOOLS.map((t) => ({
        name: t.name, title: t.title, description: t.description,
        inputSchema: {
          type: 'object', properties: t.properties, additionalProperties: false,
          ...(t.required ? { required: t.required } : {}),
        },
        annotations: { title: t.title, ...t.hints },
      }));
    },
    find(name: string): ToolDef | undefined {
      return TOOLS.find((t) => t.name === name);
    },
    call,
    /** A read tool's reply as a value, or the API's refusal thrown: for resources/list and read. */
    async read(ctx: C, name: 'list_runs' | 'get_run', args: Record<string, unknown>): Promise<unknown> {
      const reply = await callRoute(ctx, TOOLS.find((t) => t.name === name)!, args);
      return replyValue(reply);
    },
  };
}
