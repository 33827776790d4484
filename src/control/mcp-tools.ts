// The Control Plane's MCP tools (docs/mcp.md): each is one operation of the API, its input schema read from the
// OpenAPI document and called through that route's own handler, so the validation, the audit row, the loopback-only
// authority and the answer are the API's; requestFor, not the pipeline, refuses a name the operation lacks.
import type { Ctx } from '../http/pipeline.ts';
import { refusalOf } from '../http/pipeline.ts';
import { checkLoopbackOnly, isLoopbackHost } from '../http/guards.ts';
import { HttpError, errorBody } from '../http/http-error.ts';
import { TAKEN_OVER, type Reply } from '../http/respond.ts';
import { FailedError } from '../errors.ts';
import { isJsonObject, jsonDepth, MAX_JSON_DEPTH } from '../json-value.ts';
import { tryParseJson, describe as describeValue } from '../untrusted.ts';
import type { ControlDeps } from './deps.ts';
import { noteAudit, recordRefusal } from './audited.ts';
import { invalidParam } from './params.ts';
import { SEGMENT } from '../run-json.ts';
import { routeOperation, type DocumentedRoute } from './openapi.ts';
import { schemas } from './openapi-schemas.ts';

type C = Ctx<ControlDeps>;
type Schema = Record<string, unknown>;
type Hints = { readOnlyHint: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
type ToolSpec = ReturnType<typeof tool>;
type ToolDef = ReturnType<typeof define>;

const PATH_PARAMS: Record<string, Schema> = {
  source: {
    type: 'string', pattern: SEGMENT.source, description: "The run's source (default: this Control Plane's own source)",
  },
  run: { type: 'string', pattern: SEGMENT.source, description: 'The run id, e.g. r01m8h6m60vvg5jq5rmsxcgyxgw' },
};
const READ = { readOnlyHint: true, openWorldHint: false } as const;
const ACT = { readOnlyHint: false, destructiveHint: false, openWorldHint: true } as const;

/**
 * The tool over operation `id`: its path parameters (`source` may be left out), then its query parameters or its JSON
 * body's fields but `omit`, required as the operation requires them but `optional`. `artifact`: the file it reads.
 */
function tool(
  name: string, id: string, title: string, description: string, hints: Hints,
  extra: { artifact?: string; omit?: string; optional?: string } = {},
) {
  return { name, id, title, description, hints, extra };
}

function define({ name, title, description, hints, extra }: ToolSpec, route: DocumentedRoute) {
  const op = routeOperation(route);
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const [, param] of op.path.matchAll(/\{(\w+)\}/g)) {
    if (param === 'path') continue;
    properties[param!] = PATH_PARAMS[param!]!;
    if (param !== 'source') required.push(param!);
  }
  for (const [key, description, schema] of op.query ?? []) properties[key] = { type: 'string', ...schema, description };
  const body = (schemas as Record<string, { properties?: Record<string, Schema>; required?: string[] }>)[op.body ?? ''];
  for (const [key, schema] of Object.entries(body?.properties ?? {})) if (key !== extra.omit) properties[key] = schema;
  required.push(...(body?.required ?? []).filter((key) => key !== extra.optional));
  const rest: 'query' | 'body' | 'none' = op.query ? 'query' : body?.properties ? 'body' : 'none';
  const { artifact } = extra;
  return { name, title, description, hints, route, path: op.path, rest, properties, required, artifact };
}

const TOOLS: readonly ToolSpec[] = [
  tool('list_runs', 'listRuns', 'List runs', 'Runs newest first, one page at a time (pass next_cursor back as ' +
    'cursor), filtered like GET /v1/runs', READ),
  tool('get_run', 'getRun', 'Show a run', 'One run: status, question, verdict, cost, PR, artifacts, pending answer, ' +
    'retry attempts, and why each action would be refused now', READ),
  tool('start_run', 'createRun', 'Start a run', 'Start a coding-agent run in a registered project on this machine ' +
    '(exactly one of brief, spec_path or issue_url); the same request_id with the same arguments returns the same run',
  ACT),
  tool('answer_run', 'answerRun', 'Answer a blocked run', "Answer the question a blocked run asked (see get_run's " +
    'question); refused unless it is blocked. Left out, the answer is asked of a user whose client can ask ' +
    '(elicitation, revision 2026-07-28)', ACT, { omit: 'origin', optional: 'answer' }),
  tool('stop_run', 'stopRun', 'Stop a run', 'Stop a queued, running or blocked run (it goes stopping, then stopped)',
    { ...ACT, destructiveHint: true, idempotentHint: true }),
  tool('resume_run', 'resumeRun', 'Resume a run', 'Resume a stopped or failed run in its worktree', ACT),
  tool('retry_run', 'retryRun', 'Retry a run', 'Start a new run with the same brief in the same retry group', ACT),
  tool('verify_run', 'verifyRun', 'Verify a run again', 'Re-run the checks and re-issue the Evidence Receipt', ACT),
  tool('get_run_diff', 'getArtifact', "Read a run's diff", 'The patch the run made (diff.patch), as text', READ,
    { artifact: 'diff.patch' }),
  tool('get_run_events', 'listEvents', "Read a run's events", "The run's events oldest first, one page at a time",
    READ),
  tool('get_run_receipt', 'getArtifact', "Read a run's receipt", 'The signed Evidence Receipt (receipt.json): ' +
    'verdict, checks, diff digest, cost', READ, { artifact: 'receipt.json' }),
  tool('list_merge_queue', 'listMergeQueue', 'Show the merge queue', "The merge queue in order, with each entry's " +
    'PR, verdict and receipt signer', READ),
  tool('add_to_merge_queue', 'addToMergeQueue', 'Queue a run for merging', 'Queue a run whose pull request and ' +
    'receipt the repository policy accepts', { ...ACT, idempotentHint: true }),
  tool('run_merge_queue', 'runMergeQueue', 'Merge the queue', 'Merge the queued pull requests in order, ' +
    're-checking each receipt first', { readOnlyHint: false, destructiveHint: true, openWorldHint: true }),
];

function requestFor(tool: ToolDef, args: Record<string, unknown>, ownSource: string) {
  const params: Record<string, string> = {};
  const query = new URLSearchParams();
  const body: Record<string, unknown> = {};
  for (const key of Object.keys(args)) {
    if (!Object.hasOwn(tool.properties, key)) invalidParam(`Unknown argument "${key.slice(0, 64)}"`);
  }
  for (const [, name] of tool.path.matchAll(/\{(\w+)\}/g)) {
    if (name === 'path') continue;
    const given = args[name!];
    const value = given === undefined && name === 'source' ? ownSource : given;
    if (typeof value !== 'string') invalidParam(`Argument "${name}" must be a string, not ${describeValue(value)}`);
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
  return invalidParam(`Argument "${key}" must be ${schema.type === 'integer' ? 'an integer' : 'a string'}, ` +
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
  const value = tryParseJson(text);
  return value === undefined ? text : value;
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
  const known = refusalOf(err);
  if (known) return result(errorBody(known.code, known.message), true);
  throw err;
}

export type McpTools = ReturnType<typeof createMcpTools>;

export function createMcpTools(routes: () => readonly DocumentedRoute[]) {
  let resolved: ToolDef[] | undefined;

  /** A tool naming no route is a bug in svc (a FailedError: a 500 or -32603). */
  function tools(): ToolDef[] {
    resolved ??= TOOLS.map((spec) => {
      const route = routes().find((r) => r.doc.id === spec.id);
      if (!route) throw new FailedError(`MCP tool ${spec.name} names no route of operation ${spec.id}`);
      return define(spec, route);
    });
    return resolved;
  }

  async function callRoute(ctx: C, tool: ToolDef, args: Record<string, unknown>): Promise<Reply> {
    const { route } = tool;
    let params: Record<string, string> = {};
    let request: ReturnType<typeof requestFor>;
    try {
      request = requestFor(tool, args, ctx.deps.settings.source);
      params = request.params;
      // The API's authority: a loopback-only route is loopback-only here too (main.ts binds by the same rule).
      if (route.loopbackOnly) checkLoopbackOnly(ctx.req, isLoopbackHost(ctx.deps.settings.host));
    } catch (err) {
      // Refused before the handler ran, as the pipeline refuses: audited as the API action (when it is one).
      if (err instanceof HttpError) {
        const { req, peer, requestId } = ctx;
        const info = { route, params, req, peer, requestId, error: err };
        recordRefusal(ctx.deps, info, { refused_by: 'mcp', tool: tool.name });
      }
      throw err;
    }
    const inner: C = { ...ctx, params, query: request.query, body: request.body, raw: undefined };
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
      return tools().map((t) => ({
        name: t.name, title: t.title, description: t.description,
        inputSchema: {
          type: 'object', properties: t.properties, additionalProperties: false,
          ...(t.required.length > 0 ? { required: t.required } : {}),
        },
        annotations: { title: t.title, ...t.hints },
      }));
    },
    find(name: string): ToolDef | undefined {
      return tools().find((t) => t.name === name);
    },
    call,
    /** A read tool's reply as a value, or the API's refusal thrown: for resources/list and read. */
    async read(ctx: C, name: 'list_runs' | 'get_run', args: Record<string, unknown>): Promise<unknown> {
      const reply = await callRoute(ctx, tools().find((t) => t.name === name)!, args);
      return replyValue(reply);
    },
  };
}
