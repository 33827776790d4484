// GET /health (liveness) and GET /status (which routes and notifiers are configured: booleans and counts, never
// values).
import { json, type Reply } from '../../http/respond.ts';
import { ROUTES } from '../secrets.ts';
import type { TCtx } from './common.ts';

export function getHealth(): Reply {
  return json(200, { status: 'ok' });
}

export function getStatus(ctx: TCtx): Reply {
  const { settings, queue } = ctx.deps;
  const routes: Record<string, { configured: boolean; enabled: boolean }> = {};
  for (const route of ROUTES) {
    const s = settings.secrets[route];
    routes[`/${route}`] = { configured: Boolean(s.value), enabled: s.unavailable === null };
  }
  return json(200, {
    routes,
    notifiers: {
      chata: settings.notify.chataHooksPrefix !== '',
      trackera: Boolean(settings.notify.trackeraApiKey),
      trackerb: settings.notify.trackerb !== undefined,
    },
    trackerb_filter: {
      assignees: settings.trackerbFilter.assignees.length > 0,
      labels: settings.trackerbFilter.labels.length > 0,
    },
    jobs: queue.depth(),
    // Counts only, as everything here: this route needs no token, and repository names are the operator's business.
    repos: { served: settings.repos.entries.length, skipped_unserved: ctx.deps.skips.snapshot() },
  });
}
