// What every webhook handler does the same way: secret present, signature good, body-hash dedupe, one reply shape.
import { createHash } from 'node:crypto';
import { HttpError } from '../../http/http-error.ts';
import { json, type Reply } from '../../http/respond.ts';
import type { Ctx } from '../../http/pipeline.ts';
import type { TriggerDeps } from '../deps.ts';
import type { RouteName } from '../secrets.ts';
import type { VerifyResult } from '../verify.ts';
import type { EnqueueRequest, Origin, ReplyTarget } from '../delivery.ts';

export type TCtx = Ctx<TriggerDeps>;

/** The route's secret, or 503 not_configured naming the variable (or why the route is disabled). */
export function secretFor(ctx: TCtx, route: RouteName): string {
  const s = ctx.deps.settings.secrets[route];
  if (s.unavailable || !s.value) {
    throw new HttpError('not_configured', s.unavailable ?? `Route /${route} is not configured: set ${s.variable}`);
  }
  return s.value;
}

/** 401 with nothing queued; the log says which check failed, the caller learns only that it failed. */
export function requireValid(ctx: TCtx, route: RouteName, result: VerifyResult): void {
  if (result.ok) return;
  ctx.deps.log.warn('webhook refused', { route, reason: result.reason, request_id: ctx.requestId, peer: ctx.peer });
  throw new HttpError('invalid_signature', 'Signature is missing, wrong or stale');
}

export function rawOf(ctx: TCtx): Buffer {
  return ctx.raw ?? Buffer.alloc(0);
}

/** Retries of the same delivery carry the same bytes: sha256(raw body) is a dedupe key on every route (DESIGN §5). */
export function bodyKey(route: RouteName, raw: Buffer): string {
  return `${route}:body:${createHash('sha256').update(raw).digest('hex')}`;
}

export function header(ctx: TCtx, name: string): string | undefined {
  const value = ctx.req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function mediaType(ctx: TCtx): string {
  return (header(ctx, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
}

export function skipped(reason: string): Reply {
  return json(200, { status: 'skipped', reason });
}

/**
 * A delivery no served repository takes: counted for GET /status and logged, never queued. Returns the
 * reason for the route's 2xx "skipped" answer, which its vendor does not retry.
 */
export function unserved(ctx: TCtx, route: RouteName, reason: string): string {
  ctx.deps.skips.count(route);
  ctx.deps.log.info('delivery skipped: repository not served', { route, reason, request_id: ctx.requestId });
  return reason;
}

export interface Replies {
  queued: (jobId: string) => Reply;
  duplicate?: (jobId: string) => Reply;
}

export const accepted: Replies = { queued: (jobId) => json(202, { job_id: jobId, status: 'queued' }) };

export interface JobText {
  brief: string;
  args: string[];
}

/**
 * A delivery that passed its route's checks: what identifies it, and its job. `job` when building it cost nothing
 * but the parse; `prepare` when it reads files or starts a child process, which then runs only after the cheap
 * checks let it.
 */
export type Intake = {
  origin: Origin;
  /** The served repository (owner/name) the delivery was routed to. */
  repo: string;
  dedupeKeys: readonly string[];
  reply?: ReplyTarget | undefined;
} & ({ job: JobText } | { prepare: () => Promise<JobText> });

function full(ctx: TCtx, origin: Origin): HttpError {
  ctx.deps.log.warn('queue share full', { route: origin, request_id: ctx.requestId });
  return new HttpError('too_many_requests', `The job queue has no room for /${origin} deliveries; try again later`, {
    'retry-after': '30',
  });
}

function duplicate(ctx: TCtx, origin: Origin, jobId: string, replies: Replies): Reply {
  ctx.deps.log.info('duplicate delivery', { route: origin, job_id: jobId });
  return replies.duplicate?.(jobId) ?? json(200, { status: 'duplicate' });
}

/**
 * Cheap checks first: a repeat or a delivery whose route's queue share is full is answered before
 * `prepare` runs. Then dedupe keys, job and reply target commit together and the reply goes out; 429 without a job
 * id when the share filled meanwhile.
 */
export async function enqueue(ctx: TCtx, intake: Intake, replies: Replies = accepted): Promise<Reply> {
  const { origin, dedupeKeys, repo } = intake;
  // A job that is ready costs nothing more before its transaction, which makes the same checks: no second look.
  if ('job' in intake) return commit(ctx, { origin, repo, ...intake.job, dedupeKeys, reply: intake.reply }, replies);
  const admission = await ctx.deps.queue.admit(origin, dedupeKeys);
  if (admission.kind === 'full') throw full(ctx, origin);
  if (admission.kind === 'duplicate') return duplicate(ctx, origin, admission.jobId, replies);
  try {
    const job = await intake.prepare();
    return await commit(ctx, { origin, repo, ...job, dedupeKeys, reply: intake.reply }, replies);
  } finally {
    admission.release();
  }
}

async function commit(ctx: TCtx, request: EnqueueRequest, replies: Replies): Promise<Reply> {
  const result = await ctx.deps.queue.enqueue(request);
  if (result.kind === 'full') throw full(ctx, request.origin);
  if (result.kind === 'duplicate') return duplicate(ctx, request.origin, result.jobId, replies);
  ctx.deps.log.info('job queued', { route: request.origin, job_id: result.jobId, repo: request.repo });
  return replies.queued(result.jobId);
}
