// The Control Plane as a pure factory: one ordered route table compiled at boot (STYLE habit 1), and the liveness,
// readiness and metrics routes (/ready also proves the DB answers a query).
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { fileURLToPath } from 'node:url';
import { createPipeline, type Handler, type Route, type RequestListener } from '../http/pipeline.ts';
import { MiB } from '../http/body.ts';
import { HttpError } from '../http/http-error.ts';
import { metricsReply } from '../http/metrics.ts';
import { JSON_HEADERS, type Reply } from '../http/respond.ts';
import { createStaticFiles } from '../http/static-files.ts';
import { errorMessage } from '../errors.ts';
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
import { getOpenapi } from './openapi.ts';
import { mcpRoutes } from './mcp.ts';
import { audited, recordRefusal } from './audited.ts';

type R = Route<ControlDeps>;

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
  try {
    ctx.deps.stores.runs.ping();
  } catch (err) {
    ctx.deps.log.error('readiness check failed', { error: errorMessage(err) });
    throw new HttpError('unavailable', 'Database is not available');
  }
  return OK;
};

const getMetrics: Handler<ControlDeps> = (ctx) => metricsReply(ctx.deps.metrics.registry);

const RUN = '/v1/runs/:source/:run';
const INGEST_LIMIT = 16 * MiB;
/** A run action only this machine may ask for, with an optional `{}` body. */
const LOCAL_ACTION = { loopbackOnly: true, body: 'optional-json' } as const;

export const controlRoutes: readonly R[] = [
  { method: 'GET', pattern: '/health', handler: getHealth, auth: false },
  { method: 'GET', pattern: '/ready', handler: getReady, auth: false },
  // The same token as /v1/* (DESIGN §4): counts of runs and traffic are the operator's business.
  { method: 'GET', pattern: '/metrics', handler: getMetrics, auth: true },
  { method: 'GET', pattern: '/v1/openapi.json', handler: getOpenapi },
  { method: 'GET', pattern: '/v1/runs', handler: listRuns },
  { method: 'POST', pattern: '/v1/runs', handler: audited('run.start', startRun), loopbackOnly: true, body: 'json' },
  { method: 'POST', pattern: '/v1/start', handler: audited('run.start', startRun), loopbackOnly: true, body: 'json' },
  { method: 'GET', pattern: RUN, handler: getRun },
  { method: 'DELETE', pattern: RUN, handler: audited('run.delete', deleteRun), ...LOCAL_ACTION },
  { method: 'POST', pattern: `${RUN}/stop`, handler: audited('run.stop', stopRun), ...LOCAL_ACTION },
  { method: 'POST', pattern: `${RUN}/resume`, handler: audited('run.resume', resumeRun), ...LOCAL_ACTION },
  { method: 'POST', pattern: `${RUN}/retry`, handler: audited('run.retry', retryRun), ...LOCAL_ACTION },
  { method: 'POST', pattern: `${RUN}/verify`, handler: audited('run.verify', verifyRun), body: 'optional-json' },
  { method: 'POST', pattern: `${RUN}/pr`, handler: audited('run.pr', openRunPr), ...LOCAL_ACTION },
  { method: 'POST', pattern: `${RUN}/answer`, handler: audited('run.answer', answerRun), body: 'json' },
  { method: 'GET', pattern: `${RUN}/events`, handler: listEvents },
  { method: 'GET', pattern: `${RUN}/stream`, handler: streamRun },
  { method: 'GET', pattern: `${RUN}/artifact/*path`, handler: getArtifact },
  { method: 'GET', pattern: '/v1/stream', handler: streamAll },
  { method: 'GET', pattern: '/v1/stats', handler: getStats },
  { method: 'GET', pattern: '/v1/stats/cost', handler: getCostStats },
  { method: 'GET', pattern: '/v1/audit', handler: listAudit },
  { method: 'GET', pattern: '/v1/config', handler: getConfig },
  { method: 'PUT', pattern: '/v1/config', handler: audited('config.write', putConfig),
    loopbackOnly: true, body: 'json' },
  { method: 'GET', pattern: '/v1/providers', handler: listProviders },
  { method: 'GET', pattern: '/v1/integrations', handler: listIntegrations },
  { method: 'GET', pattern: '/v1/notifications', handler: listNotifications },
  { method: 'GET', pattern: '/v1/merge/queue', handler: listMergeQueue },
  { method: 'POST', pattern: '/v1/merge/queue', handler: audited('merge.enqueue', addToMergeQueue), body: 'json' },
  { method: 'POST', pattern: '/v1/merge/run', handler: audited('merge.run', runMergeQueue), ...LOCAL_ACTION },
  { method: 'GET', pattern: '/v1/review/risk', handler: getReviewRisk },
  { method: 'GET', pattern: '/v1/keys', handler: getKeys, loopbackOnly: true },
  { method: 'GET', pattern: '/v1/repos', handler: listRepos, loopbackOnly: true },
  { method: 'GET', pattern: '/v1/projects', handler: listRegisteredProjects, loopbackOnly: true },
  { method: 'POST', pattern: '/v1/ingest', handler: audited('runs.ingest', ingestRuns),
    body: 'json', limit: INGEST_LIMIT, runner: true },
  { method: 'POST', pattern: '/v1/import', handler: audited('runs.import', importRuns),
    loopbackOnly: true, body: 'json', limit: INGEST_LIMIT },
  // MCP (docs/mcp.md): its tools call the routes above through their own handlers.
  ...mcpRoutes(() => controlRoutes),
];

export function createControlApp(
  deps: ControlDeps, boundToLoopback: () => boolean, ownOrigins: () => ReadonlySet<string>,
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
    requests: deps.metrics.requests,
    accessLog: deps.settings.accessLog,
  });
}
