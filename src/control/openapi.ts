// The OpenAPI 3.1 description of both servers as data, served at /v1/openapi.json: each Control Plane route's `doc` in
// its table (app.ts, mcp.ts) and the trigger server's operations listed here; one builder.
// test/http/openapi.test.ts checks it against both route tables and against real responses.
import type { Handler, Route } from '../http/pipeline.ts';
import type { Method } from '../http/router.ts';
import type { ControlDeps } from './deps.ts';
import { schemas, responses, ref } from './openapi-schemas.ts';
import { FAILURE_CLASSES, RUN_STATUSES, SEGMENT, VERDICTS } from '../run-json.ts';
import { SOURCES, type WebhookSource } from '../webhook-sources.ts';

type Server = 'control' | 'trigger' | 'both';
// Left out: SVC_CONTROL_TOKEN when the Control Plane has one (optional security); api-token: SVC_API_TOKEN, required.
type Security = 'none' | 'api-token' | 'api-token-or-loopback' | 'signature' | 'server-token';
/** `Other` is every operation's `default`, never listed by status. */
export type Err = Exclude<keyof typeof responses, 'Other'>;
type Query = ReadonlyArray<readonly [name: string, description: string, schema?: Record<string, unknown>]>;

/** What a route's table entry documents; its method, path, loopback-only and optional body are the route's own. */
interface Doc {
  id: string;
  summary: string;
  tag: string;
  /** The trigger server serves this path too. */
  server?: 'both';
  security?: Security;
  /** The request body's schema: `Empty` may be left out. */
  body?: string;
  ok?: Ok;
  also?: Ok[];
  errors?: Err[];
}

export type DocumentedRoute = Route<ControlDeps> & { doc: Doc };

interface Op extends Omit<Doc, 'server'> {
  server: Server;
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;
  loopbackOnly?: boolean;
  bodyOptional?: boolean;
  query?: Query;
}

/** An operation's fields but its id, tag and summary; `ok` as a schema name is a 200 answering it. */
type DocOptions = Omit<Partial<Doc>, 'ok'> & { ok?: Ok | string };

function docOf(id: string, tag: string, summary: string, { ok, ...rest }: DocOptions): Doc {
  return { id, tag, summary, ...rest, ok: typeof ok === 'string' ? { status: 200, schema: ok } : ok };
}

/** The route's own options and its operation's. */
export type RouteOptions = Pick<Route<ControlDeps>, 'auth' | 'loopbackOnly' | 'runner' | 'limit'> & DocOptions;

/**
 * A Control Plane route (app.ts, mcp.ts) and its operation: a body schema makes it take JSON. A GET /v1 route's row
 * names its operation's query parameters, and the pipeline refuses any other (docs/control-data.md, "Strict"): one
 * list for it and the document.
 */
export function route(
  method: Method, pattern: string, handle: Handler<ControlDeps>, id: string, tag: string, summary: string,
  options: RouteOptions = {},
): DocumentedRoute {
  const { auth, loopbackOnly, runner, limit, ...rest } = options;
  const body = rest.body === undefined ? undefined : rest.body === 'Empty' ? 'optional-json' : 'json';
  const strict = method === 'GET' && pattern.startsWith('/v1/');
  const query = strict ? (QUERIES[id] ?? []).map(([name]) => name) : undefined;
  const doc = docOf(id, tag, summary, rest);
  return { method, pattern, handler: handle, auth, loopbackOnly, runner, body, limit, query, doc };
}

interface Ok {
  status: number;
  schema?: string;
  /** A media type without a schema; null: no body at all. */
  type?: string | null;
  description?: string;
}

const LIMIT = { type: 'integer', minimum: 1, maximum: 500, default: 50 };
const EVENT_ID = { type: 'integer', minimum: 0 };
const SEGMENT_SCHEMA = { type: 'string', pattern: SEGMENT.source };
const PAGE: Query = [
  ['limit', 'default 50, clamped to 500', LIMIT], ['cursor', 'next_cursor of the previous page'],
];
const RANGE: Query = [
  ['since', 'ISO-8601 or unix ms'], ['until', 'ISO-8601 or unix ms'], ['repo', 'repository name'],
];

/**
 * Each operation's query parameters: what its route accepts (every GET /v1 route: none other) and what it says. Keyed
 * by operation id (a test checks each key names a route: a misspelt one would refuse every parameter of its route).
 */
export const QUERIES: Readonly<Record<string, Query>> = {
  listRuns: [
    ['verdict', 'none = no receipt yet', { enum: [...VERDICTS, 'none'] }],
    ['status', 'run status', { enum: [...RUN_STATUSES] }],
    ['failure', 'the class of failure of a run that did not succeed', { enum: [...FAILURE_CLASSES] }],
    ['source', 'the source that sent the run', SEGMENT_SCHEMA], ['group_id', 'retry chain id', SEGMENT_SCHEMA],
    ...RANGE, ...PAGE,
  ],
  listEvents: [
    ['after', 'event id', EVENT_ID], ['cursor', 'next_cursor of the previous page (not with after)'],
    ['limit', 'default 50, clamped to 500', LIMIT],
  ],
  streamRun: [['after', 'event id', EVENT_ID]],
  streamAll: [
    ['after', 'event id', EVENT_ID], ['source', "only this source's runs", SEGMENT_SCHEMA],
    ['run', 'only this run (with source)', SEGMENT_SCHEMA],
  ],
  getStats: RANGE,
  getCostStats: RANGE,
  listAudit: [...PAGE, ['verify', 'true: also re-check the whole chain (chain: {intact, first_broken_id})']],
  listNotifications: PAGE,
  getReviewRisk: [['source', 'run source'], ['run', 'run id']],
};

/** A route of the Control Plane's table as its operation (also what its MCP tool, mcp-tools.ts, takes as input). */
export function routeOperation(route: DocumentedRoute): Op {
  const { doc: d, method, pattern } = route;
  return {
    ...d, server: d.server ?? 'control', method: method.toLowerCase() as Op['method'], path: toOpenapiPath(pattern),
    loopbackOnly: route.loopbackOnly, bodyOptional: route.body === 'optional-json',
    query: QUERIES[d.id],
  };
}

function trigger(method: Op['method'], path: string, id: string, tag: string, summary: string, rest: DocOptions): Op {
  return { ...docOf(id, tag, summary, rest), server: 'trigger', method, path };
}

function webhook({ name: origin, forms }: WebhookSource, summary: string, also: Ok): Op {
  const id = `receive${origin[0]!.toUpperCase()}${origin.slice(1)}`;
  return trigger('post', `/${origin}`, id, 'webhooks', summary, {
    security: 'signature', body: 'Open', ok: { status: 202, schema: 'Queued', description: 'queued' }, also: [also],
    // A form body (GitHub's default content type, `payload=…`) is refused but where the record reads forms (chata's).
    errors: ['BadRequest', 'Unauthorized', 'TooLarge', ...(forms ? [] : ['UnsupportedType' as const]),
      'TooMany', 'Unavailable'],
  });
}

const SKIPPED = {
  status: 200, schema: 'Skipped',
  description: 'skipped (not an event that starts a job), a duplicate delivery, or an answer to a blocked run taken or '
    + 'refused',
};
const CHAT_REPLY = {
  status: 200, schema: 'Open', description: "the chat's own reply format (also for a skipped or duplicate delivery)",
};

/** The trigger server's own operations (its /health, /ready and /metrics are the Control Plane routes' `both`). */
const TRIGGER_OPERATIONS: readonly Op[] = [
  ...SOURCES.flatMap((s: WebhookSource) => (s.api
    ? [webhook(s, s.api.summary, s.api.answer === 'chat' ? CHAT_REPLY : SKIPPED)]
    : [])),
  trigger('get', '/status', 'getTriggerStatus', 'health',
    'Which routes and notifiers are configured (booleans and counts, never values) and the queue depth',
    { security: 'none', ok: 'Open' }),
  trigger('post', '/jobs', 'createJob', 'jobs', 'Queue a job directly (bearer SVC_API_TOKEN)', {
    security: 'api-token', body: 'JobRequest', ok: { status: 202, schema: 'Queued' }, also: [SKIPPED],
    errors: ['Unauthorized', 'TooMany', 'Unavailable'],
  }),
  trigger('get', '/jobs/{id}', 'getJob', 'jobs', 'One job and the run it follows (bearer SVC_API_TOKEN; without ' +
    'one set, open to this machine on a loopback-bound server, else 503 not_configured)', {
    security: 'api-token-or-loopback', ok: 'Job', errors: ['Unauthorized', 'NotFound', 'Unavailable'],
  }),
];

export const CONTROL_SERVER = { url: 'http://127.0.0.1:47821', description: 'Control Plane (svc control serve)' };
export const TRIGGER_SERVER = { url: 'http://127.0.0.1:7373', description: 'Trigger server (svc trigger serve)' };

/** `{}` in the list makes a scheme optional: the Control Plane needs its token only when it was given one. */
const SECURITY: Record<Security | 'control-token', unknown[]> = {
  none: [],
  signature: [],
  'api-token': [{ triggerApiToken: [] }],
  'api-token-or-loopback': [{ triggerApiToken: [] }, {}],
  'server-token': [{ controlToken: [] }, { triggerApiToken: [] }, {}],
  'control-token': [{ controlToken: [] }, {}],
};

function okResponse(ok: Ok): Record<string, unknown> {
  if (ok.type === null) return { description: ok.description ?? 'OK' };
  const content = ok.schema
    ? { 'application/json': { schema: ref(ok.schema) } }
    : { [ok.type ?? 'application/json']: {} };
  return { description: ok.description ?? 'OK', content };
}

// What the shared pipeline may answer on any route; `default` covers the rest (405, 408, 414, 431, 500, 503).
const ANY_ROUTE: Err[] = ['BadRequest', 'Forbidden'];

function operation(op: Op): Record<string, unknown> {
  const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1], in: 'path', required: true, schema: { type: 'string' },
  }));
  const query = (op.query ?? []).map(([name, description, schema]) => ({
    name, in: 'query', required: false, description, schema: schema ?? { type: 'string' },
  }));
  const oks = [op.ok ?? { status: 200 }, ...(op.also ?? [])];
  const errors = new Set<Err>([...ANY_ROUTE, ...(op.errors ?? [])]);
  if (op.security === undefined) errors.add('Unauthorized');
  if (op.body) errors.add('TooLarge');
  if (op.body && op.security !== 'signature') errors.add('UnsupportedType');
  const errorRefs = [...errors].sort((a, b) => ERROR_STATUS[a] - ERROR_STATUS[b])
    .map((e) => [String(ERROR_STATUS[e]), { $ref: `#/components/responses/${e}` }]);
  const out: Record<string, unknown> = {
    operationId: op.id,
    summary: op.summary,
    tags: [op.tag],
    security: SECURITY[op.security ?? 'control-token'],
    parameters: [...params, ...query],
    responses: {
      ...Object.fromEntries(oks.map((ok) => [String(ok.status), okResponse(ok)])),
      ...Object.fromEntries(errorRefs),
      default: { $ref: '#/components/responses/Other' },
    },
  };
  if (op.loopbackOnly) out['x-loopback-only'] = true;
  const content = op.body && { 'application/json': { schema: ref(op.body) } };
  if (content) out.requestBody = { required: !op.bodyOptional, content };
  if (op.server === 'both') out.servers = [CONTROL_SERVER, TRIGGER_SERVER];
  return out;
}

const ERROR_STATUS: Record<Err, number> = {
  BadRequest: 400, Unauthorized: 401, Forbidden: 403, NotFound: 404, Conflict: 409, TooLarge: 413, UnsupportedType: 415,
  TooMany: 429, Unavailable: 503,
};

const TAGS: Record<string, string> = {
  health: 'Liveness and readiness; no token needed',
  meta: 'This document',
  runs: 'Runs: list, detail, artifacts and the actions that start, steer or remove them',
  events: 'Run events as pages and as Server-Sent Events',
  stats: 'Counts, durations and cost over a time range',
  admin: 'Configuration, audit chain, receipt keys, repositories and registered projects',
  catalog: 'Providers, integrations and outbound notifications',
  merge: 'The merge queue',
  mcp: 'Model Context Protocol endpoint: the tools and run resources of docs/mcp.md over Streamable HTTP',
  ingest: 'Runs arriving from runners (ingest) and from project folders (import)',
  webhooks: 'Signed deliveries to the trigger server that queue jobs',
  jobs: 'Jobs queued directly on the trigger server (bearer SVC_API_TOKEN), and any job looked up by id',
};

/**
 * The document of the Control Plane's `routes` and the trigger server's operations. With `ownUrl` (a bound server's),
 * that URL is named first wherever the Control Plane's default URL is.
 */
export function buildOpenapi(
  version: string, routes: readonly DocumentedRoute[], ownUrl = '',
): Record<string, unknown> {
  const operations = [...routes.map(routeOperation), ...TRIGGER_OPERATIONS];
  const own = (servers: Array<typeof CONTROL_SERVER>) => (ownUrl
    ? [{ url: ownUrl, description: 'this Control Plane' }, ...servers.filter((s) => s.url !== ownUrl)]
    : servers);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const item = (paths[op.path] ??= {});
    if (op.server === 'trigger') item.servers = [TRIGGER_SERVER];
    if (op.server === 'control') item.servers = own([CONTROL_SERVER]);
    item[op.method] = operation(op);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc Control Plane and trigger server',
      version,
      description: 'Errors from both servers: {"error":{"code","message"}}. ' +
        'Every /v1 call needs Authorization: Bearer <SVC_CONTROL_TOKEN> when the Control Plane has a token ' +
        '(security lists it as optional for that reason).',
    },
    servers: own([CONTROL_SERVER, TRIGGER_SERVER]),
    tags: [...new Set(operations.map((o) => o.tag))].map((name) => ({ name, description: TAGS[name] ?? name })),
    paths,
    components: {
      schemas,
      responses,
      securitySchemes: {
        controlToken: { type: 'http', scheme: 'bearer', description: 'SVC_CONTROL_TOKEN (Control Plane /v1/*)' },
        triggerApiToken: {
          type: 'http', scheme: 'bearer', description: 'SVC_API_TOKEN or SVC_API_TOKEN_FILE (trigger /jobs)',
        },
      },
    },
  };
}

/** `/v1/runs/:source/:run/artifact/*path` → `/v1/runs/{source}/{run}/artifact/{path}` (router syntax → OpenAPI). */
export function toOpenapiPath(pattern: string): string {
  return pattern.replace(/[:*](\w+)/g, '{$1}');
}
