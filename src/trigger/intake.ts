// What every source's handler does alike (trigger/sources/<name>.ts): the secret present, the signature over the raw
// bytes (every scheme), the body-hash dedupe key, one reply shape, and the hand-off to the queue.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../http/http-error.ts';
import { json, type Reply } from '../http/respond.ts';
import type { Ctx } from '../http/pipeline.ts';
import type { TriggerDeps } from './deps.ts';
import type { SourceName as RouteName } from '../webhook-sources.ts';
import type { EnqueueRequest, Origin, ReplyTarget } from './queue.ts';

export type TCtx = Ctx<TriggerDeps>;
type Header = string | string[] | undefined;

/** The route's secret, or 503 not_configured naming the variable (or why the route is disabled). */
export function secretFor(ctx: TCtx, route: RouteName): string {
  const s = ctx.deps.settings.secrets[route];
  if (s.unavailable || !s.value) {
    throw new HttpError('not_configured', s.unavailable ?? `Route /${route} is not configured: set ${s.variable}`);
  }
  return s.value;
}

// The signature schemes: each a pure function over the raw bytes and an injected clock; nothing parses first.
/** Why a delivery was refused; the handler turns any of these into 401 invalid_signature. */
export type VerifyFailure =
  | 'missing_signature' | 'malformed_signature' | 'bad_signature' | 'missing_timestamp' | 'stale_timestamp';
export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailure };

/** Signature windows are ±300 s (spec "Limits"; DESIGN §5). */
export const WINDOW_MS = 300_000;

const OK: VerifyResult = { ok: true };
function fail(reason: VerifyFailure): VerifyResult {
  return { ok: false, reason };
}

function single(value: Header): string | undefined {
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

function hmac(key: string | Buffer, parts: ReadonlyArray<string | Buffer>): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** Decode, check the byte length, then compare in constant time (octokit/webhooks-methods habit). */
function matchesHex(expected: Buffer, hex: string): VerifyResult {
  if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== expected.length * 2) return fail('malformed_signature');
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected) ? OK : fail('bad_signature');
}

function matchesBase64(expected: Buffer, b64: string): VerifyResult {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return fail('malformed_signature');
  const given = Buffer.from(b64, 'base64');
  if (given.length !== expected.length) return fail('malformed_signature');
  return timingSafeEqual(given, expected) ? OK : fail('bad_signature');
}

function withinWindow(whenMs: number, nowMs: number): boolean {
  return Number.isFinite(whenMs) && Math.abs(nowMs - whenMs) <= WINDOW_MS;
}

/**
 * errtrack's `errtrack-hook-signature` and trackera's `TRACKERA-Signature`: the bare hex HMAC-SHA256 of the body.
 * errtrack has no signed timestamp (dedupe is the replay defence); trackera's is checked on the parsed body next.
 */
export function verifyHexBody(secret: string, raw: Buffer, signature: Header): VerifyResult {
  const sig = single(signature)?.trim();
  if (!sig) return fail('missing_signature');
  return matchesHex(hmac(secret, [raw]), sig);
}

/** chata: `v0=` + hex HMAC over `v0:<ts>:<raw>`; the timestamp header is unix seconds within ±300 s. */
export function verifyChata(
  secret: string, raw: Buffer, timestamp: Header, signature: Header, nowMs: number,
): VerifyResult {
  const sig = single(signature)?.trim();
  const ts = single(timestamp)?.trim();
  if (!sig) return fail('missing_signature');
  if (!ts) return fail('missing_timestamp');
  if (!/^\d{1,12}$/.test(ts)) return fail('missing_timestamp');
  if (!sig.startsWith('v0=')) return fail('malformed_signature');
  // Check the MAC before the clock so a forged request learns nothing from which check failed first.
  const result = matchesHex(hmac(secret, [`v0:${ts}:`, raw]), sig.slice(3));
  if (!result.ok) return result;
  return withinWindow(Number(ts) * 1000, nowMs) ? OK : fail('stale_timestamp');
}

/** trackera's `webhookTimestamp` is unix milliseconds inside the signed body (see fixtures/linear-*.json). */
export function checkTrackeraTimestamp(webhookTimestamp: unknown, nowMs: number): VerifyResult {
  if (typeof webhookTimestamp !== 'number') return fail('missing_timestamp');
  return withinWindow(webhookTimestamp, nowMs) ? OK : fail('stale_timestamp');
}

/**
 * The WebSub / GitHub form, `sha256=<hex>` HMAC of the raw body: Jira's `X-Hub-Signature` and GitHub's
 * `X-Hub-Signature-256` (which header is the source's record, src/webhook-sources.ts).
 */
export function verifyHubSignature(secret: string, raw: Buffer, signature: Header): VerifyResult {
  const sig = single(signature)?.trim();
  if (!sig) return fail('missing_signature');
  if (!sig.startsWith('sha256=')) return fail('malformed_signature');
  return matchesHex(hmac(secret, [raw]), sig.slice(7));
}

/** chatb: `Authorization: HMAC <base64>` = base64 HMAC of the raw body keyed by the base64-decoded token. */
export function verifyChatbSignature(key: Buffer, raw: Buffer, authorization: Header): VerifyResult {
  const header = single(authorization)?.trim();
  if (!header) return fail('missing_signature');
  const match = /^HMAC\s+(\S+)$/i.exec(header);
  if (!match) return fail('malformed_signature');
  return matchesBase64(hmac(key, [raw]), match[1]!);
}

/** chatb's Activity `timestamp` is an ISO-8601 string inside the signed body (DESIGN §5). */
export function checkChatbTimestamp(timestamp: unknown, nowMs: number): VerifyResult {
  if (typeof timestamp !== 'string' || timestamp.length > 64) return fail('missing_timestamp');
  const when = Date.parse(timestamp);
  if (!Number.isFinite(when)) return fail('missing_timestamp');
  return withinWindow(when, nowMs) ? OK : fail('stale_timestamp');
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

export function mediaType(ctx: TCtx): string {
  return (ctx.req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
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

const accepted: Replies = { queued: (jobId) => json(202, { job_id: jobId, status: 'queued' }) };

/**
 * The argv of the sources whose text is a brief (GitHub, Jira, Teams): `--brief` so the text is never
 * reclassified, `--pr` always. Text from outside follows `--brief`, so it is never read as an option.
 */
export function briefPrArgs(brief: string): string[] {
  return ['start', '--brief', brief, '--pr', '--detach'];
}

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
  return replies.queued(result.jobId);
}
