// What every source does alike (its handler is trigger/sources/<name>.ts): the secret present, the bearer token or
// the signature over the raw bytes (every scheme), the dedupe keys, the argv, the replies, the hand-off to the queue.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../http/http-error.ts';
import { safeEqual } from '../http/guards.ts';
import { json, type Reply } from '../http/respond.ts';
import type { Ctx } from '../http/pipeline.ts';
import type { TriggerDeps } from './deps.ts';
import {
  BRIEF, decodeChatbKey, deliveryKeys, sourceOf, type Source, type SourceName, type WebhookSource,
} from '../webhook-sources.ts';
import type { EnqueueRequest, Origin, ReplyTarget } from './queue.ts';
import { queuedReply } from './metrics.ts';
import { startDelivery, type Delivery } from './job-trace.ts';

export type TCtx = Ctx<TriggerDeps>;
type Header = string | string[] | undefined;
type Scheme = NonNullable<WebhookSource['scheme']>;

/** The route's secret, or 503 not_configured naming the variable (or why the route is disabled). */
export function secretFor(ctx: TCtx, route: SourceName): string {
  const s = ctx.deps.settings.secrets[route];
  if (s.unavailable || !s.value) {
    throw new HttpError('not_configured', s.unavailable ?? `Route /${route} is not configured: set ${s.variable}`);
  }
  return s.value;
}

export function requireBearer(ctx: TCtx, token: string): void {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '');
  if (!match || !safeEqual(match[1]!, token)) {
    throw new HttpError('unauthorized', 'Missing or wrong bearer token', { 'www-authenticate': 'Bearer' });
  }
}

/**
 * Every route's own check, run before its handler and before anything parses the body: 503 without the secret, then
 * the bearer token, or the signature of the record's `scheme` over the raw bytes. Returns those bytes.
 */
export function admit(ctx: TCtx, source: Source): Buffer {
  const secret = secretFor(ctx, source.name);
  const raw = ctx.raw ?? Buffer.alloc(0);
  if (!('scheme' in source)) {
    requireBearer(ctx, secret);
    return raw;
  }
  const { headers } = ctx.req;
  // The first family whose signature header the delivery carries (the spec's names come first), else the first.
  const family = source.families.find((f) => headers[f.signature] !== undefined) ?? source.families[0];
  const timestamp = 'timestamp' in family ? headers[family.timestamp] : null;
  const key = 'secretForm' in source ? decodeChatbKey(secret)! : secret;
  const now = ctx.deps.clock();
  requireValid(ctx, source.name, checkSignature(source.scheme, key, raw, headers[family.signature], timestamp, now));
  return raw;
}

/** Why a delivery was refused (null: it passed); the caller is answered 401 invalid_signature whichever it is. */
export type Refusal =
  | 'missing_signature' | 'malformed_signature' | 'bad_signature' | 'missing_timestamp' | 'stale_timestamp' | null;

/** Signature windows are ±300 s (spec "Limits"; DESIGN §5). */
const WINDOW_MS = 300_000;

function single(value: Header): string | undefined {
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

function withinWindow(whenMs: number, nowMs: number): Refusal {
  return Number.isFinite(whenMs) && Math.abs(nowMs - whenMs) <= WINDOW_MS ? null : 'stale_timestamp';
}

/**
 * A signature of a record's `scheme`, a pure function of the raw bytes and the clock. `timestamp` is the signed
 * timestamp header's value, null where the scheme signs none. The MAC is checked before the clock, so a forged
 * request learns nothing from which check failed first.
 */
export function checkSignature(
  scheme: Scheme, key: string | Buffer, raw: Buffer, signature: Header, timestamp: Header | null, nowMs: number,
): Refusal {
  const sig = single(signature)?.trim();
  if (!sig) return 'missing_signature';
  const ts = timestamp === null ? null : single(timestamp)?.trim() ?? '';
  if (ts !== null && !/^\d{1,12}$/.test(ts)) return 'missing_timestamp';
  const prefix = scheme.prefix?.exec(sig);
  if (prefix === null) return 'malformed_signature';
  const mac = createHmac('sha256', key);
  if (ts !== null) mac.update(`v0:${ts}:`);
  const refusal = matches(scheme.mac, mac.update(raw).digest(), sig.slice(prefix?.[0].length ?? 0));
  return refusal ?? (ts === null ? null : withinWindow(Number(ts) * 1000, nowMs));
}

/** Decode, check the byte length, then compare in constant time (octokit/webhooks-methods habit). */
function matches(form: Scheme['mac'], expected: Buffer, text: string): Refusal {
  const wellFormed = form === 'hex'
    ? /^[0-9a-fA-F]+$/.test(text) && text.length === expected.length * 2
    : /^[A-Za-z0-9+/]+={0,2}$/.test(text) && text.length % 4 === 0;
  const given = wellFormed ? Buffer.from(text, form) : undefined;
  if (given?.length !== expected.length) return 'malformed_signature';
  return timingSafeEqual(given, expected) ? null : 'bad_signature';
}

/**
 * A time the signed body carries, checked once the handler parsed it: trackera's `webhookTimestamp` (unix ms,
 * fixtures/linear-*.json) and chatb's Activity `timestamp` (ISO-8601, DESIGN §5).
 */
export function checkBodyTime(form: 'ms' | 'iso', value: unknown, nowMs: number): Refusal {
  if (form === 'ms') return typeof value === 'number' ? withinWindow(value, nowMs) : 'missing_timestamp';
  const when = typeof value === 'string' && value.length <= 64 ? Date.parse(value) : NaN;
  return Number.isNaN(when) ? 'missing_timestamp' : withinWindow(when, nowMs);
}

/** 401 with nothing queued; the log says which check failed, the caller learns only that it failed. */
export function requireValid(ctx: TCtx, route: SourceName, reason: Refusal): void {
  if (reason === null) return;
  ctx.deps.log.warn('webhook refused', { route, reason, request_id: ctx.requestId, peer: ctx.peer });
  throw new HttpError('invalid_signature', 'Signature is missing, wrong or stale');
}

export function skipped(reason: string): Reply {
  return json(200, { status: 'skipped', reason });
}

/**
 * A delivery no served repository takes: counted for GET /status and logged, never queued; answered as a skip
 * (a 2xx, which its vendor does not retry) in the route's own form.
 */
export function unserved(ctx: TCtx, route: SourceName, reason: string, answer = skipped): Reply {
  ctx.deps.skips.count(route);
  ctx.deps.log.info('delivery skipped: repository not served', { route, reason, request_id: ctx.requestId });
  return answer(reason);
}

export interface Replies {
  queued: (jobId: string) => Reply;
  duplicate?: (jobId: string) => Reply;
}

const accepted: Replies = { queued: (jobId) => json(202, { job_id: jobId, status: 'queued' }) };

/**
 * A delivery that passed its route's checks: where it goes and its job's brief, given when building it cost nothing
 * but the parse, else `prepare`d (it reads files or starts a child process) only after the cheap checks let it.
 */
export type Intake = {
  origin: Origin;
  /** The served repository (owner/name) the delivery was routed to. */
  repo: string;
  /** Dedupe keys besides the two every delivery has: its body's hash and its vendor's delivery id (DESIGN §5). */
  keys?: readonly string[];
  reply?: ReplyTarget | undefined;
  /** The argv, where the source's record has none (`jobs`). */
  args?: string[];
} & ({ brief: string } | { prepare: () => Promise<string> });

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
 * id when the share filled meanwhile. Not `async`: a job that is ready goes to the queue with no promise of its own.
 */
export function enqueue(ctx: TCtx, intake: Intake, replies: Replies = accepted): Promise<Reply> {
  const { origin } = intake;
  const source = sourceOf(origin);
  // Retries of one delivery carry the same bytes, and the vendor's delivery id where it sends one.
  const dedupeKeys = deliveryKeys(origin, ctx.req.headers, ctx.raw, ...(intake.keys ?? []));
  const delivery = startDelivery(ctx.deps.tracer, ctx.req, origin, intake.repo);
  // A job that is ready costs nothing more before its transaction, which makes the same checks: no second look.
  if ('brief' in intake) {
    return commit(ctx, request(source, intake, intake.brief, dedupeKeys, delivery), replies, delivery);
  }
  return prepareThenCommit(ctx, source, intake, dedupeKeys, replies, delivery);
}

async function prepareThenCommit(
  ctx: TCtx, source: WebhookSource, intake: Intake & { prepare: () => Promise<string> }, dedupeKeys: string[],
  replies: Replies, delivery: Delivery,
): Promise<Reply> {
  const { origin } = intake;
  const admission = await ctx.deps.queue.admit(origin, dedupeKeys);
  if (admission.kind === 'full') throw full(ctx, origin);
  if (admission.kind === 'duplicate') return duplicate(ctx, origin, admission.jobId, replies);
  try {
    const brief = await intake.prepare();
    return await commit(ctx, request(source, intake, brief, dedupeKeys, delivery), replies, delivery);
  } finally {
    admission.release();
  }
}

function request(
  source: WebhookSource, intake: Intake, brief: string, dedupeKeys: string[], delivery: Delivery,
): EnqueueRequest {
  const args = intake.args ?? source.argv!.map((a) => (a === BRIEF ? brief : a));
  const { origin, repo, reply } = intake;
  return { origin, repo, brief, args, dedupeKeys, reply, trace: delivery.job };
}

function commit(ctx: TCtx, request: EnqueueRequest, replies: Replies, delivery: Delivery): Promise<Reply> {
  return ctx.deps.queue.enqueue(request).then((result) => {
    delivery.span?.end('unset', { 'svc.outcome': result.kind, 'svc.job_id': 'jobId' in result ? result.jobId : null });
    if (result.kind === 'full') throw full(ctx, request.origin);
    if (result.kind === 'duplicate') return duplicate(ctx, request.origin, result.jobId, replies);
    return queuedReply(replies.queued(result.jobId));
  });
}
