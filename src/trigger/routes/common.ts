// What every webhook handler does the same way: secret present, signature good, body-hash dedupe, one reply shape.
import { createHash } from 'node:crypto';
import { HttpError } from '../../http/http-error.ts';
import { json, type Reply } from '../../http/respond.ts';
import type { Ctx } from '../../http/pipeline.ts';
import type { TriggerDeps } from '../deps.ts';
import type { RouteName } from '../secrets.ts';
import type { VerifyResult } from '../verify.ts';
import type { EnqueueRequest } from '../queue.ts';

export type TCtx = Ctx<TriggerDeps>;

/** The route's secret, or 503 not_configured naming the variable (or why the route is disabled). */
export function secretFor(ctx: TCtx, route: RouteName): string {
  const s = ctx.deps.settings.secrets[route];
  if (s.unavailable || !s.value) throw new HttpError('not_configured', s.unavailable ?? `Route /${route} is not configured: set ${s.variable}`);
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

export interface Replies {
  queued: (jobId: string) => Reply;
  duplicate?: (jobId: string) => Reply;
}

export const accepted: Replies = { queued: (jobId) => json(202, { job_id: jobId, status: 'queued' }) };

/** Commits dedupe keys, job and reply target together, then answers; 429 without a job id when the queue is full. */
export async function enqueue(ctx: TCtx, request: EnqueueRequest, replies: Replies = accepted): Promise<Reply> {
  const result = await ctx.deps.queue.enqueue(request);
  if (result.kind === 'full') {
    ctx.deps.log.warn('queue full', { route: request.origin, request_id: ctx.requestId });
    throw new HttpError('too_many_requests', 'The job queue is full; try again later', { 'retry-after': '30' });
  }
  if (result.kind === 'duplicate') {
    ctx.deps.log.info('duplicate delivery', { route: request.origin, job_id: result.jobId });
    return replies.duplicate?.(result.jobId) ?? json(200, { status: 'duplicate' });
  }
  ctx.deps.log.info('job queued', { route: request.origin, job_id: result.jobId });
  return replies.queued(result.jobId);
}
