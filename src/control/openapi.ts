// The OpenAPI 3.1 description of both servers as data: one operation list, one builder.
// test/http/openapi.test.ts fails when a route in controlRoutes/triggerRoutes is missing here or vice versa.
import { schemas, pageSchemas, responses } from './openapi-schemas.ts';

type Server = 'control' | 'trigger' | 'both';
type Auth = 'token' | 'none' | 'api-token' | 'signature';
type Err = keyof typeof responses;

interface Op {
  server: Server;
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;
  id: string;
  summary: string;
  tag: string;
  auth?: Auth;
  loopbackOnly?: boolean;
  query?: Array<[name: string, description: string]>;
  body?: string;
  ok?: { status: number; schema?: string; type?: string; description?: string };
  errors?: Err[];
}

const RUN = '/v1/runs/{source}/{run}';
const RUN_FILTERS: Op['query'] = [
  ['verdict', 'verified | verified_with_gaps | not_verified | none (no receipt yet)'], ['status', 'run status'],
  ['source', 'the source that sent the run'], ['repo', 'repository name'],
  ['group_id', 'retry chain id'], ['since', 'ISO-8601 or unix ms'], ['until', 'ISO-8601 or unix ms'],
  ['limit', 'default 50, clamped to 500'], ['cursor', 'next_cursor of the previous page'],
];
const PAGE: Op['query'] = [['limit', 'default 50, clamped to 500'], ['cursor', 'next_cursor of the previous page']];
const RANGE: Op['query'] = [['since', 'ISO-8601 or unix ms'], ['until', 'ISO-8601 or unix ms'], ['repo', 'repository name']];
const SSE = { status: 200, type: 'text/event-stream', description: 'Server-Sent Events: id = event id, event = kind; honours Last-Event-ID and ?after=; `: ping` every 15 s' };
const ACCEPTED_RUN = { status: 202, schema: 'Run' };
const WEBHOOK_ERRORS: Err[] = ['Unauthorized', 'TooLarge', 'TooMany', 'Unavailable'];

function action(name: string, summary: string, extra: Partial<Op> = {}): Op {
  return { server: 'control', method: 'post', path: `${RUN}/${name}`, id: `${name}Run`, summary, tag: 'runs', ok: ACCEPTED_RUN, errors: ['NotFound', 'Conflict'], ...extra };
}

function webhook(origin: string, summary: string): Op {
  return { server: 'trigger', method: 'post', path: `/${origin}`, id: `receive${origin[0]!.toUpperCase()}${origin.slice(1)}`, summary, tag: 'webhooks', auth: 'signature', body: 'Open', ok: { status: 202, schema: 'Queued', description: 'queued (chat origins answer 200 with their reply format; skipped/duplicate answer 200)' }, errors: WEBHOOK_ERRORS };
}

export const operations: readonly Op[] = [
  { server: 'both', method: 'get', path: '/health', id: 'getHealth', summary: 'Liveness: the process answers', tag: 'health', auth: 'none', ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'get', path: '/ready', id: 'getReady', summary: 'Readiness: the database is open and usable', tag: 'health', auth: 'none', ok: { status: 200, schema: 'Open' }, errors: ['Unavailable'] },
  { server: 'control', method: 'get', path: '/v1/openapi.json', id: 'getOpenapi', summary: 'This document', tag: 'meta', ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'get', path: '/v1/runs', id: 'listRuns', summary: 'List runs, newest first, keyset-paged', tag: 'runs', query: RUN_FILTERS, ok: { status: 200, schema: 'RunPage' }, errors: ['BadRequest'] },
  { server: 'control', method: 'post', path: '/v1/runs', id: 'createRun', summary: 'Start a run (same as POST /v1/start)', tag: 'runs', loopbackOnly: true, body: 'StartRequest', ok: ACCEPTED_RUN, errors: ['BadRequest', 'Conflict', 'UnsupportedType', 'TooMany'] },
  { server: 'control', method: 'post', path: '/v1/start', id: 'startRun', summary: 'Start a run; the same request_id and body return the same run (200)', tag: 'runs', loopbackOnly: true, body: 'StartRequest', ok: ACCEPTED_RUN, errors: ['BadRequest', 'Conflict', 'UnsupportedType', 'TooMany'] },
  { server: 'control', method: 'get', path: RUN, id: 'getRun', summary: 'One run, with its artifacts, pending answer and retry-group attempts', tag: 'runs', ok: { status: 200, schema: 'RunDetail' }, errors: ['BadRequest', 'NotFound'] },
  { server: 'control', method: 'delete', path: RUN, id: 'deleteRun', summary: 'Delete a finished run (409 while queued, running or blocked)', tag: 'runs', loopbackOnly: true, ok: { status: 200, schema: 'Open' }, errors: ['NotFound', 'Conflict'] },
  action('stop', 'Stop a run (goes stopping, then stopped)', { loopbackOnly: true }),
  action('resume', 'Resume a stopped or failed run in its worktree (429 at max_concurrent_runs)', { loopbackOnly: true, errors: ['NotFound', 'Conflict', 'TooMany'] }),
  action('retry', 'Start a new run in the same group (429 at max_concurrent_runs)', { loopbackOnly: true, errors: ['NotFound', 'Conflict', 'TooMany'] }),
  action('verify', 'Re-run the checks and re-issue the receipt'),
  action('answer', 'Answer a blocked run (409 unless blocked)', { body: 'Answer' }),
  { server: 'control', method: 'get', path: `${RUN}/events`, id: 'listEvents', summary: "A run's events after an id", tag: 'events', query: [['after', 'event id'], ['limit', 'page size']], ok: { status: 200, schema: 'EventPage' }, errors: ['NotFound'] },
  { server: 'control', method: 'get', path: `${RUN}/stream`, id: 'streamRun', summary: "Follow one run's events", tag: 'events', query: [['after', 'event id']], ok: SSE, errors: ['NotFound'] },
  { server: 'control', method: 'get', path: `${RUN}/artifact/{path}`, id: 'getArtifact', summary: 'A file recorded for the run (path may contain /; ETag is its sha256)', tag: 'runs', ok: { status: 200, type: '*/*' }, errors: ['BadRequest', 'NotFound'] },
  { server: 'control', method: 'get', path: '/v1/stream', id: 'streamAll', summary: "Follow every run's events", tag: 'events', query: [['after', 'event id']], ok: SSE },
  { server: 'control', method: 'get', path: '/v1/stats', id: 'getStats', summary: 'Counts by status and verdict, success rate, duration p50/p95, runs per day', tag: 'stats', query: RANGE, ok: { status: 200, schema: 'Open' }, errors: ['BadRequest'] },
  { server: 'control', method: 'get', path: '/v1/stats/cost', id: 'getCostStats', summary: 'Cost and tokens: total, unknown-cost runs, by provider, repo and day', tag: 'stats', query: RANGE, ok: { status: 200, schema: 'Open' }, errors: ['BadRequest'] },
  { server: 'control', method: 'get', path: '/v1/audit', id: 'listAudit', summary: 'Mutating actions as a hash chain, newest first', tag: 'admin', query: PAGE, ok: { status: 200, schema: 'OpenPage' } },
  { server: 'control', method: 'get', path: '/v1/config', id: 'getConfig', summary: 'Configuration (secrets redacted) and its version', tag: 'admin', ok: { status: 200, schema: 'Config' } },
  { server: 'control', method: 'put', path: '/v1/config', id: 'putConfig', summary: 'Replace configuration; If-Match: <version> guards lost updates', tag: 'admin', loopbackOnly: true, body: 'Config', ok: { status: 200, schema: 'Config' }, errors: ['BadRequest', 'Conflict', 'UnsupportedType'] },
  { server: 'control', method: 'get', path: '/v1/providers', id: 'listProviders', summary: 'Coding-agent providers and whether they are installed (a bare array)', tag: 'catalog', ok: { status: 200, schema: 'ProviderList' } },
  { server: 'control', method: 'get', path: '/v1/integrations', id: 'listIntegrations', summary: 'Each trigger route: configured or not (never values)', tag: 'catalog', ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'get', path: '/v1/notifications', id: 'listNotifications', summary: 'Outbound messages about runs and their delivery status', tag: 'catalog', query: PAGE, ok: { status: 200, schema: 'OpenPage' } },
  { server: 'control', method: 'get', path: '/v1/merge/queue', id: 'listMergeQueue', summary: 'The merge queue in order', tag: 'merge', ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'post', path: '/v1/merge/queue', id: 'addToMergeQueue', summary: 'Queue a run whose PR and receipt the policy accepts', tag: 'merge', body: 'RunTarget', ok: { status: 202, schema: 'Open' }, errors: ['BadRequest', 'NotFound', 'Conflict'] },
  { server: 'control', method: 'post', path: '/v1/merge/run', id: 'runMergeQueue', summary: 'Merge queued runs in order, re-checking each', tag: 'merge', loopbackOnly: true, ok: { status: 202, schema: 'Open' } },
  { server: 'control', method: 'get', path: '/v1/review/risk', id: 'getReviewRisk', summary: "Review risk score from a run's diff", tag: 'runs', query: [['source', 'run source'], ['run', 'run id']], ok: { status: 200, schema: 'ReviewRisk' }, errors: ['BadRequest', 'NotFound'] },
  { server: 'control', method: 'get', path: '/v1/keys', id: 'getKeys', summary: 'Ed25519 public keys that sign receipts (kid, PEM, JWK)', tag: 'admin', loopbackOnly: true, ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'get', path: '/v1/repos', id: 'listRepos', summary: 'Repository names', tag: 'admin', loopbackOnly: true, ok: { status: 200, schema: 'Open' } },
  { server: 'control', method: 'post', path: '/v1/ingest', id: 'ingestRuns', summary: 'Shipper upload: runs upsert, events idempotent on (source, run, seq); body up to 16 MiB', tag: 'ingest', body: 'IngestBatch', ok: { status: 200, schema: 'IngestResult' }, errors: ['BadRequest', 'Forbidden', 'TooLarge', 'UnsupportedType'] },
  { server: 'control', method: 'post', path: '/v1/import', id: 'importRuns', summary: 'Read <path>/.svc/runs/* into the database', tag: 'ingest', loopbackOnly: true, body: 'ImportRequest', ok: { status: 200, schema: 'Open' }, errors: ['BadRequest', 'TooLarge'] },
  webhook('errtrack', 'Error-tracker alert (errtrack-hook-signature: hex HMAC-SHA256 of the body)'),
  webhook('chata', 'Chat-A slash command or events URL verification (v0 signature, 300 s window)'),
  webhook('trackera', 'Tracker-A issue event (TRACKERA-Signature, signed webhookTimestamp within 300 s)'),
  webhook('trackerb', 'Tracker-B issue created/updated (X-Hub-Signature sha256=…; dedupe on delivery id and body)'),
  webhook('chatb', 'Chat-B activity (Authorization: HMAC <base64>; timestamp within 300 s)'),
  webhook('webhook', 'Source-host webhook (GITHUB_WEBHOOK_SECRET; X-Hub-Signature-256)'),
  { server: 'trigger', method: 'get', path: '/status', id: 'getTriggerStatus', summary: 'Which routes and notifiers are configured (booleans and counts, never values) and the queue depth', tag: 'health', auth: 'none', ok: { status: 200, schema: 'Open' } },
  { server: 'trigger', method: 'post', path: '/jobs', id: 'createJob', summary: 'Queue a job directly (bearer SVC_API_TOKEN)', tag: 'jobs', auth: 'api-token', body: 'JobRequest', ok: { status: 202, schema: 'Queued' }, errors: ['BadRequest', 'Unauthorized', 'TooLarge', 'TooMany', 'UnsupportedType', 'Unavailable'] },
  { server: 'trigger', method: 'get', path: '/jobs/{id}', id: 'getJob', summary: 'One job and the run it follows', tag: 'jobs', auth: 'api-token', ok: { status: 200, schema: 'Job' }, errors: ['Unauthorized', 'NotFound', 'Unavailable'] },
];

export const CONTROL_SERVER = { url: 'http://127.0.0.1:47821', description: 'Control Plane (svc control serve)' };
export const TRIGGER_SERVER = { url: 'http://127.0.0.1:7373', description: 'Trigger server (svc trigger serve)' };

function security(op: Op): unknown[] {
  if (op.auth === 'none' || op.auth === 'signature') return [];
  return op.auth === 'api-token' ? [{ triggerApiToken: [] }] : [{ controlToken: [] }];
}

function operation(op: Op): Record<string, unknown> {
  const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
  const query = (op.query ?? []).map(([name, description]) => ({ name, in: 'query', required: false, description, schema: { type: 'string' } }));
  const ok = op.ok ?? { status: 200 };
  const content = ok.schema
    ? { 'application/json': { schema: { $ref: `#/components/schemas/${ok.schema}` } } }
    : { [ok.type ?? 'application/json']: {} };
  const out: Record<string, unknown> = {
    operationId: op.id,
    summary: op.summary,
    tags: [op.tag],
    security: security(op),
    parameters: [...params, ...query],
    responses: {
      [String(ok.status)]: { description: ok.description ?? 'OK', content },
      ...Object.fromEntries((op.errors ?? []).map((e) => [String(errorStatusOf(e)), { $ref: `#/components/responses/${e}` }])),
      ...(op.loopbackOnly ? { '403': { $ref: '#/components/responses/Forbidden' } } : {}),
      ...(op.auth === undefined || op.auth === 'token' ? { '401': { $ref: '#/components/responses/Unauthorized' } } : {}),
    },
  };
  if (op.loopbackOnly) out['x-loopback-only'] = true;
  if (op.body) out.requestBody = { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${op.body}` } } } };
  if (op.server === 'both') out.servers = [CONTROL_SERVER, TRIGGER_SERVER];
  return out;
}

const ERROR_STATUS: Record<Err, number> = {
  BadRequest: 400, Unauthorized: 401, Forbidden: 403, NotFound: 404, Conflict: 409, TooLarge: 413, UnsupportedType: 415, TooMany: 429, Unavailable: 503,
};

function errorStatusOf(e: Err): number {
  return ERROR_STATUS[e];
}

export function buildOpenapi(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of operations) {
    const item = (paths[op.path] ??= {});
    // Trigger-only paths name their server on the path item; the shared one (/health) on the operation.
    if (op.server === 'trigger') item.servers = [TRIGGER_SERVER];
    item[op.method] = operation(op);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc Control Plane and trigger server',
      version,
      description: 'Errors from both servers: {"error":{"code","message"}}. Every /v1 call needs Authorization: Bearer <SVC_CONTROL_TOKEN> when the server has a token.',
    },
    servers: [CONTROL_SERVER],
    tags: [...new Set(operations.map((o) => o.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas: { ...schemas, ...pageSchemas },
      responses,
      securitySchemes: {
        controlToken: { type: 'http', scheme: 'bearer', description: 'SVC_CONTROL_TOKEN (Control Plane /v1/*)' },
        triggerApiToken: { type: 'http', scheme: 'bearer', description: 'SVC_API_TOKEN or SVC_API_TOKEN_FILE (trigger /jobs)' },
      },
    },
  };
}

/** `/v1/runs/:source/:run/artifact/*path` → `/v1/runs/{source}/{run}/artifact/{path}` (router syntax → OpenAPI). */
export function toOpenapiPath(pattern: string): string {
  return pattern.replace(/[:*](\w+)/g, '{$1}');
}
