// GET /health (liveness), GET /ready (it can take work: listening, not shutting down, its database answers) and GET
// /status (which routes and notifiers are configured: booleans and counts, never values).
import { checkDatabase, HttpError } from '../../http/http-error.ts';
import { json, type Reply } from '../../http/respond.ts';
import type { ReplyChannel } from '../summary.ts';
import { SOURCE_NAMES } from '../../webhook-sources.ts';
import type { TCtx } from '../intake.ts';
import { metricsReply } from '../../http/metrics.ts';
import { mayRead } from './jobs.ts';

export function getHealth(): Reply {
  return json(200, { status: 'ok' });
}

/** As the Control Plane's /ready: 200 when a delivery would be queued now, else 503 unavailable. */
export function getReady(ctx: TCtx): Reply {
  if (!ctx.deps.accepting()) throw new HttpError('unavailable', 'The trigger server is shutting down');
  checkDatabase(ctx.deps.log, () => ctx.deps.queue.depth());
  return json(200, { status: 'ok' });
}

/** `replies`: each reply channel's sender (app.ts), asked only whether its settings are there. */
export function getStatus(ctx: TCtx, replies: Readonly<Record<string, ReplyChannel>>): Reply {
  const { settings, queue } = ctx.deps;
  const routes: Record<string, { configured: boolean; enabled: boolean }> = {};
  for (const route of SOURCE_NAMES) {
    const s = settings.secrets[route];
    routes[`/${route}`] = { configured: Boolean(s.value), enabled: s.unavailable === null };
  }
  return json(200, {
    routes,
    notifiers: Object.fromEntries(Object.entries(replies).map(([name, r]) => [name, r.configured(settings.notify)])),
    trackerb_filter: {
      assignees: settings.trackerbFilter.assignees.length > 0,
      labels: settings.trackerbFilter.labels.length > 0,
    },
    jobs: queue.depth(),
    // Counts only, as everything here: this route needs no token, and repository names are the operator's business.
    repos: { served: settings.repos.entries.length, skipped_unserved: ctx.deps.skips.snapshot() },
  });
}

/** GET /metrics, read as GET /jobs/<id> is. */
export function getMetrics(ctx: TCtx): Reply {
  mayRead(ctx);
  return metricsReply(ctx.deps.metrics.registry);
}
