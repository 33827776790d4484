// The trigger server as a pure factory: one ordered route table compiled at boot (STYLE habit 1).
// Webhook routes' bodies (1 MiB) are signed: intake.ts `admit` verifies them before the pipeline parses (DESIGN §5).
import { createPipeline, type Route, type RequestListener } from '../http/pipeline.ts';
import { MiB } from '../http/body.ts';
import type { TriggerDeps } from './deps.ts';
import { getHealth, getReady, getStatus, getMetrics } from './routes/health.ts';
import { readErrtrack } from './sources/errtrack.ts';
import { chataReply, readChata } from './sources/chata.ts';
import { readTrackeraDelivery, trackeraReply } from './sources/trackera.ts';
import { readTrackerbDelivery, trackerbReply } from './sources/trackerb.ts';
import { readChatbDelivery } from './sources/chatb.ts';
import { githubReply, readGithub } from './sources/webhook.ts';
import { createJob, getJob } from './routes/jobs.ts';
import { SOURCES, type ReplyName, type SourceName } from '../webhook-sources.ts';
import type { ReplyChannel } from './summary.ts';
import { admit, receive, type Reader, type TCtx } from './intake.ts';
import { countDelivery } from './metrics.ts';

type R = Route<TriggerDeps>;

/** Each webhook source's reader, given its delivery once the route's check passed (`/jobs` is svc's own API). */
const READERS: Record<Exclude<SourceName, 'jobs'>, Reader> = {
  errtrack: readErrtrack,
  chata: readChata,
  trackera: readTrackeraDelivery,
  trackerb: readTrackerbDelivery,
  chatb: readChatbDelivery,
  webhook: readGithub,
};

export const REPLIES: Record<ReplyName, ReplyChannel> = {
  chata: chataReply,
  trackera: trackeraReply,
  trackerb: trackerbReply,
  webhook: githubReply,
};

export const triggerRoutes: readonly R[] = [
  { method: 'GET', pattern: '/health', handler: getHealth, auth: false },
  { method: 'GET', pattern: '/ready', handler: getReady, auth: false },
  { method: 'GET', pattern: '/status', handler: (ctx) => getStatus(ctx, REPLIES), auth: false },
  ...SOURCES.map((s): R => {
    const counted = (ctx: TCtx, answer: Parameters<typeof countDelivery>[2]) =>
      countDelivery(ctx.deps.metrics.deliveries, s.name, answer);
    if (s.name === 'jobs') {
      return {
        method: 'POST', pattern: '/jobs', body: 'raw', limit: MiB, auth: false,
        handler: (ctx) => counted(ctx, () => createJob(ctx, admit(ctx, s))),
      };
    }
    const read = READERS[s.name];
    return {
      method: 'POST', pattern: `/${s.name}`, body: 'signed', limit: MiB, auth: false,
      verify: (ctx) => admit(ctx, s), handler: (ctx) => counted(ctx, () => receive(ctx, s, read)),
    };
  }),
  { method: 'GET', pattern: '/jobs/:id', handler: getJob, auth: false },
  // Its token rule is GET /jobs/<id>'s (routes/health.ts getMetrics).
  { method: 'GET', pattern: '/metrics', handler: getMetrics, auth: false },
];

/** `bodyTimeoutMs`: a body that has not fully arrived after this long is refused (the slow-body guard). */
export function createTriggerApp(deps: TriggerDeps, bodyTimeoutMs = 10_000): RequestListener {
  return createPipeline<TriggerDeps>({
    routes: triggerRoutes,
    deps,
    // Every route is signed or bearer-protected: a Host guard would only refuse what a reverse proxy forwards.
    boundToLoopback: false,
    token: undefined,
    log: deps.log,
    bodyTimeoutMs,
    requests: deps.metrics.requests,
    accessLog: deps.settings.accessLog,
    onBusy: deps.busyMet,
    // Every POST route is a delivery's (`/<source>`): refused before its handler (the secret, the signature, a body
    // too large, slow or not JSON) counts as its outcome too; the handler's own answers countDelivery counts.
    onRefused: ({ route }) => deps.metrics.deliveries.inc([route.pattern.slice(1), 'refused']),
  });
}
