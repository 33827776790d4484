// The OpenAPI 3.1 description of both servers as data (one operation list, one builder), served at /v1/openapi.json.
// test/http/openapi.test.ts checks it against both route tables and against real responses.
import { json } from '../http/respond.ts';
import type { Handler } from '../http/pipeline.ts';
import type { ControlDeps } from './deps.ts';
import { schemas, responses, ref } from './openapi-schemas.ts';
import { FAILURE_CLASSES, RUN_STATUSES, SEGMENT, VERDICTS } from '../run-json.ts';
import { SOURCES, type WebhookSource } from '../webhook-sources.ts';
import { VERSION } from '../version.ts';

type Server = 'control' | 'trigger' | 'both';
// Left out: SVC_CONTROL_TOKEN when the Control Plane has one (optional security); api-token: SVC_API_TOKEN, required.
type Auth = 'none' | 'api-token' | 'api-token-or-loopback' | 'signature' | 'server-token';
/** `Other` is every operation's `default`, never listed by status. */
type Err = Exclude<keyof typeof responses, 'Other'>;

interface Op {
  server: Server;
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;
  id: string;
  summary: string;
  tag: string;
  auth?: Auth;
  loopbackOnly?: boolean;
  query?: Array<[name: string, description: string, schema?: Record<string, unknown>]>;
  body?: string;
  bodyOptional?: boolean;
  ok?: Ok;
  also?: Ok[];
  errors?: Err[];
}

interface Ok {
  status: number;
  schema?: string;
  /** A media type without a schema; null: no body at all. */
  type?: string | null;
  description?: string;
}

const RUN = '/v1/runs/{source}/{run}';
const LIMIT = { type: 'integer', minimum: 1, maximum: 500, default: 50 };
const EVENT_ID = { type: 'integer', minimum: 0 };
const SEGMENT_SCHEMA = { type: 'string', pattern: SEGMENT.source };
const PAGE: Op['query'] = [
  ['limit', 'default 50, clamped to 500', LIMIT], ['cursor', 'next_cursor of the previous page'],
];
const RANGE: Op['query'] = [
  ['since', 'ISO-8601 or unix ms'], ['until', 'ISO-8601 or unix ms'], ['repo', 'repository name'],
];
const RUN_FILTERS: Op['query'] = [
  ['verdict', 'none = no receipt yet', { enum: [...VERDICTS, 'none'] }],
  ['status', 'run status', { enum: [...RUN_STATUSES] }],
  ['failure', 'the class of failure of a run that did not succeed', { enum: [...FAILURE_CLASSES] }],
  ['source', 'the source that sent the run', SEGMENT_SCHEMA], ['group_id', 'retry chain id', SEGMENT_SCHEMA],
  ...RANGE, ...PAGE,
];
const SSE = {
  status: 200, type: 'text/event-stream',
  description: 'Server-Sent Events: id = event id, event = kind; honours Last-Event-ID and ?after=; ' +
    '`: ping` every 15 s; 429 past SVC_CONTROL_MAX_STREAMS or _PER_RUN',
};
const ACCEPTED_RUN = { status: 202, schema: 'Run' };
const START: Partial<Op> = {
  loopbackOnly: true, body: 'StartRequest', ok: ACCEPTED_RUN, errors: ['Conflict', 'TooMany'],
  also: [{
    status: 200, schema: 'Run', description: 'the run an earlier request with this request_id and body started',
  }],
};
const WEBHOOK_ERRORS: Err[] = ['Unauthorized', 'TooMany', 'Unavailable'];
const ACTION_ERRORS: Err[] = ['NotFound', 'Conflict'];

function action(name: string, summary: string, extra: Partial<Op> = {}): Op {
  return {
    server: 'control', method: 'post', path: `${RUN}/${name}`, id: `${name}Run`, summary, tag: 'runs', body: 'Empty',
    bodyOptional: true, ok: ACCEPTED_RUN, errors: ACTION_ERRORS, ...extra,
  };
}

function webhook(origin: string, summary: string, also: Ok): Op {
  return {
    server: 'trigger', method: 'post', path: `/${origin}`, id: `receive${origin[0]!.toUpperCase()}${origin.slice(1)}`,
    summary, tag: 'webhooks', auth: 'signature', body: 'Open',
    ok: { status: 202, schema: 'Queued', description: 'queued' }, also: [also], errors: WEBHOOK_ERRORS,
  };
}
const SKIPPED = {
  status: 200, schema: 'Skipped',
  description: 'skipped (not an event that starts a job), a duplicate delivery, or an answer to a blocked run taken or '
    + 'refused',
};
const CHAT_REPLY = {
  status: 200, schema: 'Open', description: "the chat's own reply format (also for a skipped or duplicate delivery)",
};

/** `ok` as a schema name is a 200 answering it. */
function op(
  server: Server, verb: Op['method'], path: string, id: string, tag: string, summary: string,
  rest: Omit<Partial<Op>, 'ok'> & { ok?: Ok | string } = {},
): Op {
  const ok = typeof rest.ok === 'string' ? { status: 200, schema: rest.ok } : rest.ok;
  return { server, method: verb, path, id, tag, summary, ...rest, ok };
}

/** Also what the MCP tools (mcp-tools.ts) take as their input, and each query's names what its handler accepts. */
export const operations: readonly Op[] = [
  op('both', 'get', '/health', 'getHealth', 'health', 'Liveness: the process answers', { auth: 'none', ok: 'Status' }),
  op('both', 'get', '/ready', 'getReady', 'health',
    'Readiness: the database is open and usable (trigger server: also listening and not shutting down)',
    { auth: 'none', ok: 'Status', errors: ['Unavailable'] }),
  op('control', 'get', '/v1/openapi.json', 'getOpenapi', 'meta', 'This document', { ok: 'Open' }),
  op('control', 'get', '/v1/runs', 'listRuns', 'runs', 'List runs, newest first, keyset-paged',
    { query: RUN_FILTERS, ok: 'RunPage', errors: ['BadRequest'] }),
  op('control', 'post', '/v1/runs', 'createRun', 'runs', 'Start a run (same as POST /v1/start); a valid W3C ' +
    '`traceparent` header is continued by the run\'s trace, anything else ignored', START),
  op('control', 'post', '/v1/start', 'startRun', 'runs', 'Start a run in a registered project (POST /v1/import); ' +
    'the same request_id and body return the same run (200)', START),
  op('control', 'get', RUN, 'getRun', 'runs', 'One run, with its artifacts, pending answer and retry-group attempts',
    { ok: 'RunDetail', errors: ['NotFound'] }),
  op('control', 'delete', RUN, 'deleteRun', 'runs', 'Delete a finished run (409 while queued, running or blocked); ' +
    'its runner shipping it again does not bring it back', {
    loopbackOnly: true, body: 'Empty', bodyOptional: true, ok: 'Deleted', errors: ACTION_ERRORS,
  }),
  action('stop', 'Stop a run (goes stopping, then stopped)', { loopbackOnly: true }),
  action('resume', 'Resume a stopped or failed run in its worktree (429 at max_concurrent_runs)', {
    loopbackOnly: true, errors: [...ACTION_ERRORS, 'TooMany'],
  }),
  action('retry', 'Start a new run in the same group (429 at max_concurrent_runs)', {
    loopbackOnly: true, errors: [...ACTION_ERRORS, 'TooMany'],
  }),
  action('verify', 'Re-run the checks and re-issue the receipt'),
  action('pr', 'Open the pull request of a failed --pr run whose verified work could not be opened as one ' +
    '(no credentials then); 409 when the run has its PR or is not such a run', { loopbackOnly: true }),
  action('answer', 'Answer a blocked run (409 unless blocked)', { body: 'Answer', bodyOptional: false }),
  op('control', 'get', `${RUN}/events`, 'listEvents', 'events', "A run's events after an id", {
    query: [
      ['after', 'event id', EVENT_ID], ['cursor', 'next_cursor of the previous page (not with after)'],
      ['limit', 'default 50, clamped to 500', LIMIT],
    ],
    ok: 'EventPage', errors: ['NotFound'],
  }),
  op('control', 'get', `${RUN}/stream`, 'streamRun', 'events', "Follow one run's events",
    { query: [['after', 'event id', EVENT_ID]], ok: SSE, errors: ['NotFound', 'TooMany'] }),
  op('control', 'get', `${RUN}/artifact/{path}`, 'getArtifact', 'runs',
    'A file recorded for the run (path may contain /; ETag is its sha256)', {
    ok: { status: 200, type: '*/*' }, also: [{ status: 304, type: null, description: 'If-None-Match named its ETag' }],
    errors: ['NotFound'],
  }),
  op('control', 'get', '/v1/stream', 'streamAll', 'events', "Follow every run's events", {
    query: [
      ['after', 'event id', EVENT_ID], ['source', "only this source's runs", SEGMENT_SCHEMA],
      ['run', 'only this run (with source)', SEGMENT_SCHEMA],
    ],
    ok: SSE, errors: ['TooMany'],
  }),
  op('control', 'get', '/v1/stats', 'getStats', 'stats',
    'Counts by status and verdict, success rate, duration p50/p95, runs per day', { query: RANGE, ok: 'Open' }),
  op('control', 'get', '/v1/stats/cost', 'getCostStats', 'stats',
    'Cost and tokens: total, unknown-cost runs, by provider, repo and day', { query: RANGE, ok: 'Open' }),
  op('control', 'get', '/v1/audit', 'listAudit', 'admin', 'Mutating actions as a hash chain, newest first', {
    query: [...PAGE, ['verify', 'true: also re-check the whole chain (chain: {intact, first_broken_id})']],
    ok: 'OpenPage',
  }),
  op('control', 'get', '/v1/config', 'getConfig', 'admin', 'Configuration (secrets redacted) and its version; ' +
    'repos and providers (paths, commands) only to a caller loopback-only routes admit', { ok: 'Config' }),
  op('control', 'put', '/v1/config', 'putConfig', 'admin', 'Change settings: a partial object of settings, ' +
    'or {config, version?} as GET returns it; If-Match: <version> guards lost updates', {
    loopbackOnly: true, body: 'ConfigUpdate', ok: 'Config', errors: ['Conflict'],
  }),
  op('control', 'get', '/v1/providers', 'listProviders', 'catalog',
    'Coding-agent providers and whether they are installed (a bare array)', { ok: 'ProviderList' }),
  op('control', 'get', '/v1/integrations', 'listIntegrations', 'catalog',
    'Each trigger route: configured or not (never values)', { ok: 'Open' }),
  op('control', 'get', '/v1/notifications', 'listNotifications', 'catalog',
    'Outbound messages about runs and their delivery status', { query: PAGE, ok: 'OpenPage' }),
  op('control', 'get', '/v1/merge/queue', 'listMergeQueue', 'merge', 'The merge queue in order', { ok: 'OpenList' }),
  op('control', 'post', '/v1/merge/queue', 'addToMergeQueue', 'merge',
    'Queue a run whose PR and receipt the policy accepts', {
    body: 'RunTarget', ok: { status: 201, schema: 'Open', description: 'queued' },
    also: [{ status: 200, schema: 'Open', description: 'already queued' }], errors: ACTION_ERRORS,
  }),
  op('control', 'post', '/v1/merge/run', 'runMergeQueue', 'merge', 'Merge queued runs in order, re-checking each', {
    loopbackOnly: true, body: 'Empty', bodyOptional: true,
    ok: { status: 200, schema: 'OpenList', description: 'what happened to each queued run' },
  }),
  op('control', 'get', '/v1/review/risk', 'getReviewRisk', 'runs', "Review risk score from a run's diff",
    { query: [['source', 'run source'], ['run', 'run id']], ok: 'ReviewRisk', errors: ['NotFound'] }),
  op('control', 'get', '/v1/keys', 'getKeys', 'admin', 'Ed25519 public keys that sign receipts (kid, PEM, JWK)',
    { loopbackOnly: true, ok: 'Open' }),
  op('control', 'get', '/v1/repos', 'listRepos', 'admin',
    'Repository names: of runs, the repos setting, and those trigger servers serve',
    { loopbackOnly: true, ok: 'RepoList' }),
  op('control', 'get', '/v1/projects', 'listProjects', 'admin',
    'Registered projects: where runs may be started (imported, or the repos setting)',
    { loopbackOnly: true, ok: 'ProjectList' }),
  op('control', 'post', '/v1/ingest', 'ingestRuns', 'ingest',
    'Shipper upload: runs upsert, events idempotent on (source, run, seq); body up to 16 MiB',
    { body: 'IngestBatch', ok: 'IngestResult' }),
  op('control', 'post', '/v1/import', 'importRuns', 'ingest',
    'Register a project (runs may then be started there) and read <path>/.svc/runs/* into the database',
    { loopbackOnly: true, body: 'ImportRequest', ok: 'ImportResult' }),
  // JSON-RPC: only the HTTP envelope is described here (docs/mcp.md).
  op('control', 'post', '/mcp', 'postMcp', 'mcp', 'MCP Streamable HTTP, one JSON-RPC message per POST. Revision ' +
    '2026-07-28: stateless, each request or notification names its version in _meta and MCP-Protocol-Version / ' +
    'Mcp-Method headers (a mismatch is 400, an unserved method 404, a posted response 400, with a JSON-RPC error); ' +
    '2025-11-25: initialize answers with an Mcp-Session-Id header that every later message carries', {
    body: 'Open',
    ok: {
      status: 200, schema: 'Open', description: 'the JSON-RPC response (application/json); for subscriptions/listen ' +
        'a text/event-stream of notifications (429 past SVC_CONTROL_MAX_STREAMS or _PER_RUN)',
    },
    also: [{ status: 202, type: null, description: 'a notification (or, 2025-11-25, a response), accepted' }],
    errors: ['NotFound', 'TooMany'],
  }),
  op('control', 'delete', '/mcp', 'deleteMcp', 'mcp', 'End the MCP session named by Mcp-Session-Id', {
    ok: { status: 204, type: null, description: 'the session ended' }, errors: ['NotFound'],
  }),
  ...SOURCES.flatMap((s: WebhookSource) => (s.api
    ? [webhook(s.name, s.api.summary, s.api.answer === 'chat' ? CHAT_REPLY : SKIPPED)]
    : [])),
  op('both', 'get', '/metrics', 'getMetrics', 'health', 'Prometheus text exposition 0.0.4 (docs/deploy.md ' +
    '"Metrics"): the Control Plane\'s with its token when it has one (as /v1/*); the trigger server\'s as ' +
    'GET /jobs/{id} (bearer SVC_API_TOKEN; without one set, this machine under a loopback Host only)', {
    auth: 'server-token',
    ok: { status: 200, type: 'text/plain', description: 'text/plain; version=0.0.4; charset=utf-8' },
    errors: ['Unauthorized', 'Unavailable'],
  }),
  op('trigger', 'get', '/status', 'getTriggerStatus', 'health',
    'Which routes and notifiers are configured (booleans and counts, never values) and the queue depth',
    { auth: 'none', ok: 'Open' }),
  op('trigger', 'post', '/jobs', 'createJob', 'jobs', 'Queue a job directly (bearer SVC_API_TOKEN)', {
    auth: 'api-token', body: 'JobRequest', ok: { status: 202, schema: 'Queued' }, also: [SKIPPED],
    errors: ['Unauthorized', 'TooMany', 'Unavailable'],
  }),
  op('trigger', 'get', '/jobs/{id}', 'getJob', 'jobs', 'One job and the run it follows (bearer SVC_API_TOKEN; ' +
    'without one set, open to this machine on a loopback-bound server, else 503 not_configured)', {
    auth: 'api-token-or-loopback', ok: 'Job', errors: ['Unauthorized', 'NotFound', 'Unavailable'],
  }),
];

export const CONTROL_SERVER = { url: 'http://127.0.0.1:47821', description: 'Control Plane (svc control serve)' };
export const TRIGGER_SERVER = { url: 'http://127.0.0.1:7373', description: 'Trigger server (svc trigger serve)' };

const QUERY_KEYS = new Map(operations.map((o) => [o.id, (o.query ?? []).map(([name]) => name)]));

/** The query parameters operation `id` takes (checkQueryKeys): one list for the handler and the document. Called at
 * module load: a misspelled id throws there rather than refuse every query parameter of its route. */
export function queryKeys(id: string): readonly string[] {
  const keys = QUERY_KEYS.get(id);
  if (keys === undefined) throw new TypeError(`No operation "${id}" in the OpenAPI document`);
  return keys;
}

/** `{}` in the list makes a scheme optional: the Control Plane needs its token only when it was given one. */
const SECURITY: Record<Auth | 'control-token', unknown[]> = {
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
  if (op.auth === undefined) errors.add('Unauthorized');
  if (op.body) errors.add('TooLarge');
  if (op.body && op.auth !== 'signature') errors.add('UnsupportedType');
  const errorRefs = [...errors].sort((a, b) => ERROR_STATUS[a] - ERROR_STATUS[b])
    .map((e) => [String(ERROR_STATUS[e]), { $ref: `#/components/responses/${e}` }]);
  const out: Record<string, unknown> = {
    operationId: op.id,
    summary: op.summary,
    tags: [op.tag],
    security: SECURITY[op.auth ?? 'control-token'],
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

/** With `ownUrl` (a bound server's), that URL is named first wherever the Control Plane's default URL is. */
export function buildOpenapi(version: string, ownUrl = ''): Record<string, unknown> {
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

export const getOpenapi: Handler<ControlDeps> = (ctx) => json(200, buildOpenapi(VERSION, ctx.deps.url()));
