// The trigger server as a pure factory: one ordered route table compiled at boot (STYLE habit 1).
// Webhook routes take the raw body (1 MiB), which intake.ts `admit` verifies before a handler parses it (DESIGN §5).
import { createPipeline, type Route, type RequestListener } from '../http/pipeline.ts';
import { MiB } from '../http/body.ts';
import type { TriggerDeps } from './deps.ts';
import { getHealth, getReady, getStatus, getMetrics } from './routes/health.ts';
import { receiveErrtrack } from './sources/errtrack.ts';
import { chataReply, receiveChata } from './sources/chata.ts';
import { receiveTrackera, trackeraReply } from './sources/trackera.ts';
import { receiveTrackerb, trackerbReply } from './sources/trackerb.ts';
import { receiveChatb } from './sources/chatb.ts';
import { githubReply, receiveWebhook } from './sources/webhook.ts';
import { createJob, getJob } from './routes/jobs.ts';
import { SOURCES, type ReplyName, type SourceName } from '../webhook-sources.ts';
import type { ReplyChannel } from './summary.ts';
import { admit, type TCtx } from './intake.ts';
import { countDelivery } from './metrics.ts';
import type { Reply } from '../http/respond.ts';

type R = Route<TriggerDeps>;
const raw = { body: 'raw', limit: MiB, auth: false } as const;

/** Each source's handler, given the bytes its route's check passed. */
const RECEIVERS: Record<SourceName, (ctx: TCtx, raw: Buffer) => Reply | Promise<Reply>> = {
  errtrack: receiveErrtrack,
  chata: receiveChata,
  trackera: receiveTrackera,
  trackerb: receiveTrackerb,
  chatb: receiveChatb,
  webhook: receiveWebhook,
  jobs: createJob,
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
    const receive = RECEIVERS[s.name];
    return {
      method: 'POST', pattern: `/${s.name}`, ...raw,
      handler: (ctx) => countDelivery(ctx.deps.metrics.deliveries, s.name, () => receive(ctx, admit(ctx, s))),
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
  });
}
