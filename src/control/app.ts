// The Control Plane as a pure factory: one ordered route table compiled at boot (STYLE habit 1), and the liveness,
// readiness and metrics routes (/ready also proves the DB answers a query).
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { fileURLToPath } from 'node:url';
import { createPipeline, type Handler, type RequestListener } from '../http/pipeline.ts';
import { MiB } from '../http/body.ts';
import { checkDatabase } from '../http/http-error.ts';
import { metricsReply } from '../http/metrics.ts';
import { json, JSON_HEADERS, type Reply } from '../http/respond.ts';
import { createStaticFiles } from '../http/static-files.ts';
import { busyMet } from '../db/open.ts';
import type { ControlDeps } from './deps.ts';
import { listRuns, getRun, deleteRun, getStats, getCostStats } from './handlers/runs.ts';
import { listEvents, streamRun, streamAll } from './handlers/events.ts';
import { getArtifact } from './handlers/artifacts.ts';
import { getConfig, putConfig } from './handlers/config.ts';
import {
  listProviders, listIntegrations, listNotifications, listAudit, getKeys, listRepos, listRegisteredProjects,
} from './handlers/catalog.ts';
import { ingestRuns, importRuns } from './handlers/ingest.ts';
import { startRun, stopRun, resumeRun, retryRun, verifyRun, answerRun, openRunPr } from './handlers/actions.ts';
import { listMergeQueue, addToMergeQueue, runMergeQueue } from './handlers/merge.ts';
import { getReviewRisk } from './handlers/risk.ts';
import { buildOpenapi, route, type DocumentedRoute, type RouteOptions, type Err } from './openapi.ts';
import { VERSION } from '../version.ts';
import { mcpRoutes } from './mcp.ts';
import { audited, recordRefusal } from './audited.ts';

type R = DocumentedRoute;

const STATIC_DIR = fileURLToPath(new URL('../../static', import.meta.url));

/**
 * The SDK's SSE parser as the UI loads it (/client/sse-parse.js), so the browser and Node read streams with one
 * parser although the UI has no build step: tsc's module under dist/, or, when svc runs from its sources (the
 * tests), the source with its types stripped.
 */
function sseParserModule(): Buffer {
  if (!import.meta.url.endsWith('.ts')) return readFileSync(new URL('../client/sse-parse.js', import.meta.url));
  const source = readFileSync(new URL('../client/sse-parse.ts', import.meta.url), 'utf8');
  return Buffer.from(stripTypeScriptTypes(source));
}

// Pre-encoded: /health is the hottest, cheapest route (DESIGN §7 bar: ≥ 0.85 × plain node:http).
const OK: Reply = {
  status: 200,
  headers: JSON_HEADERS,
  body: '{"status":"ok"}',
};

const getHealth: Handler<ControlDeps> = () => OK;

const getReady: Handler<ControlDeps> = (ctx) => {
  checkDatabase(ctx.deps.log, () => ctx.deps.stores.runs.ping());
  return OK;
};

const getMetrics: Handler<ControlDeps> = (ctx) => metricsReply(ctx.deps.metrics.registry);

const RUN = '/v1/runs/:source/:run';
const INGEST_LIMIT = 16 * MiB;
const ACCEPTED_RUN = { status: 202, schema: 'Run' };
const ACTION_ERRORS: Err[] = ['NotFound', 'Conflict'];
const START: RouteOptions = {
  loopbackOnly: true, body: 'StartRequest', ok: ACCEPTED_RUN, errors: ['Conflict', 'TooMany'],
  also: [{
    status: 200, schema: 'Run', description: 'the run an earlier request with this request_id and body started',
  }],
};
const SSE = {
  status: 200, type: 'text/event-stream',
  description: 'Server-Sent Events: id = event id, event = kind; honours Last-Event-ID and ?after=; ' +
    '`: ping` every 15 s; 429 past SVC_CONTROL_MAX_STREAMS or _PER_RUN',
};

/** POST a run action, audited as run.<name>, with an optional `{}` body, answered with the run. */
function runAction(name: string, handler: Handler<ControlDeps>, summary: string, options: RouteOptions = {}): R {
  return route('POST', `${RUN}/${name}`, audited(`run.${name}`, handler), `${name}Run`, 'runs', summary, {
    body: 'Empty', ok: ACCEPTED_RUN, errors: ACTION_ERRORS, ...options,
  });
}

const getOpenapi: Handler<ControlDeps> = (ctx) => json(200, buildOpenapi(VERSION, controlRoutes, ctx.deps.url()));

export const controlRoutes: readonly R[] = [
  route('GET', '/health', getHealth, 'getHealth', 'health', 'Liveness: the process answers',
    { auth: false, server: 'both', security: 'none', ok: 'Status' }),
  route('GET', '/ready', getReady, 'getReady', 'health', 'Readiness: the database is open and usable (trigger ' +
    'server: also listening and not shutting down)',
    { auth: false, server: 'both', security: 'none', ok: 'Status', errors: ['Unavailable'] }),
  // The same token as /v1/* (DESIGN §4): counts of runs and traffic are the operator's business.
  route('GET', '/metrics', getMetrics, 'getMetrics', 'health', 'Prometheus text exposition 0.0.4 (docs/deploy.md ' +
    '"Metrics"): the Control Plane\'s with its token when it has one (as /v1/*); the trigger server\'s as ' +
    'GET /jobs/{id} (bearer SVC_API_TOKEN; without one set, this machine under a loopback Host only)', {
    auth: true, server: 'both', security: 'server-token',
    ok: { status: 200, type: 'text/plain', description: 'text/plain; version=0.0.4; charset=utf-8' },
    errors: ['Unauthorized', 'Unavailable'],
  }),
  route('GET', '/v1/openapi.json', getOpenapi, 'getOpenapi', 'meta', 'This document', { ok: 'Open' }),
  route('GET', '/v1/runs', listRuns, 'listRuns', 'runs', 'List runs, newest first, keyset-paged',
    { ok: 'RunPage', errors: ['BadRequest'] }),
  route('POST', '/v1/runs', audited('run.start', startRun), 'createRun', 'runs', 'Start a run (same as POST ' +
    '/v1/start); a valid W3C `traceparent` header is continued by the run\'s trace, anything else ignored', START),
  route('POST', '/v1/start', audited('run.start', startRun), 'startRun', 'runs', 'Start a run in a registered ' +
    'project (POST /v1/import); the same request_id and body return the same run (200)', START),
  route('GET', RUN, getRun, 'getRun', 'runs', 'One run, with its artifacts, pending answer and retry-group attempts',
    { runner: true, ok: 'RunDetail', errors: ['NotFound'] }),
  route('DELETE', RUN, audited('run.delete', deleteRun), 'deleteRun', 'runs', 'Delete a finished run (409 while ' +
    'queued, running or blocked); its runner shipping it again does not bring it back', {
    loopbackOnly: true, body: 'Empty', ok: 'Deleted', errors: ACTION_ERRORS,
  }),
  runAction('stop', stopRun, 'Stop a run (goes stopping, then stopped)', { loopbackOnly: true }),
  runAction('resume', resumeRun, 'Resume a stopped or failed run in its worktree (429 at max_concurrent_runs)', {
    loopbackOnly: true, errors: [...ACTION_ERRORS, 'TooMany'],
  }),
  runAction('retry', retryRun, 'Start a new run in the same group (429 at max_concurrent_runs)', {
    loopbackOnly: true, errors: [...ACTION_ERRORS, 'TooMany'],
  }),
  runAction('verify', verifyRun, 'Re-run the checks and re-issue the receipt'),
  runAction('pr', openRunPr, 'Open the pull request of a failed --pr run whose verified work could not be opened ' +
    'as one (no credentials then); 409 when the run has its PR or is not such a run', { loopbackOnly: true }),
  runAction('answer', answerRun, 'Answer a blocked run (409 unless blocked)', { body: 'Answer' }),
  route('GET', `${RUN}/events`, listEvents, 'listEvents', 'events', "A run's events after an id",
    { ok: 'EventPage', errors: ['NotFound'] }),
  route('GET', `${RUN}/stream`, streamRun, 'streamRun', 'events', "Follow one run's events",
    { ok: SSE, errors: ['NotFound', 'TooMany'] }),
  route('GET', `${RUN}/artifact/*path`, getArtifact, 'getArtifact', 'runs',
    'A file recorded for the run (path may contain /; ETag is its sha256)', {
    ok: { status: 200, type: '*/*' }, also: [{ status: 304, type: null, description: 'If-None-Match named its ETag' }],
    errors: ['NotFound'],
  }),
  route('GET', '/v1/stream', streamAll, 'streamAll', 'events', "Follow every run's events",
    { ok: SSE, errors: ['TooMany'] }),
  route('GET', '/v1/stats', getStats, 'getStats', 'stats',
    'Counts by status and verdict, success rate, duration p50/p95, runs per day', { ok: 'Open' }),
  route('GET', '/v1/stats/cost', getCostStats, 'getCostStats', 'stats',
    'Cost and tokens: total, unknown-cost runs, by provider, repo and day', { ok: 'Open' }),
  route('GET', '/v1/audit', listAudit, 'listAudit', 'admin', 'Mutating actions as a hash chain, newest first',
    { ok: 'OpenPage' }),
  route('GET', '/v1/config', getConfig, 'getConfig', 'admin', 'Configuration (secrets redacted) and its version; ' +
    'repos and providers (paths, commands) only to a caller loopback-only routes admit', { ok: 'Config' }),
  route('PUT', '/v1/config', audited('config.write', putConfig), 'putConfig', 'admin', 'Change settings: a partial ' +
    'object of settings, or {config, version?} as GET returns it; If-Match: <version> guards lost updates', {
    loopbackOnly: true, body: 'ConfigUpdate', ok: 'Config', errors: ['Conflict'],
  }),
  route('GET', '/v1/providers', listProviders, 'listProviders', 'catalog',
    'Coding-agent providers and whether they are installed (a bare array)', { ok: 'ProviderList' }),
  route('GET', '/v1/integrations', listIntegrations, 'listIntegrations', 'catalog',
    'Each trigger route: configured or not (never values)', { ok: 'Open' }),
  route('GET', '/v1/notifications', listNotifications, 'listNotifications', 'catalog',
    'Outbound messages about runs and their delivery status', { ok: 'OpenPage' }),
  route('GET', '/v1/merge/queue', listMergeQueue, 'listMergeQueue', 'merge', 'The merge queue in order',
    { ok: 'OpenList' }),
  route('POST', '/v1/merge/queue', audited('merge.enqueue', addToMergeQueue), 'addToMergeQueue', 'merge',
    'Queue a run whose PR and receipt the policy accepts', {
    body: 'RunTarget', ok: { status: 201, schema: 'Open', description: 'queued' },
    also: [{ status: 200, schema: 'Open', description: 'already queued' }], errors: ACTION_ERRORS,
  }),
  route('POST', '/v1/merge/run', audited('merge.run', runMergeQueue), 'runMergeQueue', 'merge',
    'Merge queued runs in order, re-checking each', {
    loopbackOnly: true, body: 'Empty',
    ok: { status: 200, schema: 'OpenList', description: 'what happened to each queued run' },
  }),
  route('GET', '/v1/review/risk', getReviewRisk, 'getReviewRisk', 'runs', "Review risk score from a run's diff",
    { ok: 'ReviewRisk', errors: ['NotFound'] }),
  route('GET', '/v1/keys', getKeys, 'getKeys', 'admin', 'Ed25519 public keys that sign receipts (kid, PEM, JWK)',
    { loopbackOnly: true, ok: 'Open' }),
  route('GET', '/v1/repos', listRepos, 'listRepos', 'admin',
    'Repository names: of runs, the repos setting, and those trigger servers serve',
    { loopbackOnly: true, ok: 'RepoList' }),
  route('GET', '/v1/projects', listRegisteredProjects, 'listProjects', 'admin',
    'Registered projects: where runs may be started (imported, or the repos setting)',
    { loopbackOnly: true, ok: 'ProjectList' }),
  route('POST', '/v1/ingest', audited('runs.ingest', ingestRuns), 'ingestRuns', 'ingest',
    'Shipper upload: runs upsert, events idempotent on (source, run, seq); body up to 16 MiB',
    { limit: INGEST_LIMIT, runner: true, body: 'IngestBatch', ok: 'IngestResult' }),
  route('POST', '/v1/import', audited('runs.import', importRuns), 'importRuns', 'ingest',
    'Register a project (runs may then be started there) and read <path>/.svc/runs/* into the database',
    { loopbackOnly: true, limit: INGEST_LIMIT, body: 'ImportRequest', ok: 'ImportResult' }),
  // MCP (docs/mcp.md): its tools call the routes above through their own handlers.
  ...mcpRoutes(() => controlRoutes),
];

export function createControlApp(
  deps: ControlDeps, boundToLoopback: boolean, ownOrigins: ReadonlySet<string>,
): RequestListener {
  return createPipeline<ControlDeps>({
    routes: controlRoutes,
    deps,
    boundToLoopback,
    token: deps.settings.token,
    runnerTokens: deps.settings.runnerTokens,
    ownOrigins,
    staticFiles: createStaticFiles(STATIC_DIR, { '/client/sse-parse.js': sseParserModule() }),
    log: deps.log,
    onRefused: (info) => recordRefusal(deps, info),
    onBusy: () => busyMet(deps.db),
    requests: deps.metrics.requests,
    accessLog: deps.settings.accessLog,
  });
}
