// What every source does alike around its reader (trigger/sources/<name>.ts): the secret, the bearer token or the
// signature over the raw bytes, a signed body's time, the routing, the brief, the dedupe keys, the argv, the replies,
// the hand-off to the queue.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../http/http-error.ts';
import { RefusedError } from '../errors.ts';
import { checkBearer } from '../http/guards.ts';
import { json, type Reply } from '../http/respond.ts';
import type { Ctx } from '../http/pipeline.ts';
import type { TriggerDeps } from './deps.ts';
import {
  BRIEF, briefOf, decodeChatbKey, deliveryKeys, firstHeader, sourceOf, type Source, type SourceName,
  type WebhookSource,
} from '../webhook-sources.ts';
import type { EnqueueRequest } from './queue.ts';
import type { Routed } from './served-repos.ts';
import type { ServedRepo } from './served-repos-file.ts';
import type { Obj } from '../json-value.ts';
import { queuedReply } from './metrics.ts';
import { startDelivery, type Delivery } from './job-trace.ts';

export type TCtx = Ctx<TriggerDeps>;
/** A source whose deliveries a reader reads: every one but `/jobs`, which names its repository. */
type ReadSource = Exclude<Source, { routing: 'named' }>;
/** A header's value as `firstHeader` reads it (Node joins a repeated custom header into one string). */
type Header = string | undefined;
type Scheme = NonNullable<WebhookSource['scheme']>;

/** The route's secret, or 503 not_configured naming the variable (or why the route is disabled). `handshake`: the
 * secret of a route that answers only its signed handshake (RouteSecret.handshake), whose reader refuses the rest. */
export function secretFor(ctx: TCtx, route: SourceName, handshake = false): string {
  const s = ctx.deps.settings.secrets[route];
  if ((s.unavailable && !(handshake && s.handshake)) || !s.value) {
    throw new HttpError('not_configured', s.unavailable ?? `Route /${route} is not configured: set ${s.variable}`);
  }
  return s.value;
}

/** Every route's check before anything parses its body: 503 without the secret, the bearer token or signature. */
export function admit(ctx: TCtx, source: Source): Buffer {
  const secret = secretFor(ctx, source.name, true);
  const raw = ctx.raw ?? Buffer.alloc(0);
  if (!('scheme' in source)) {
    checkBearer(ctx.req, secret);
    return raw;
  }
  const { headers } = ctx.req;
  const family = source.families.find((f) => headers[f.signature] !== undefined) ?? source.families[0];
  const timestamp = 'timestamp' in family ? firstHeader(headers, [family.timestamp]) : null;
  const key = 'secretForm' in source ? decodeChatbKey(secret)! : secret;
  const signature = firstHeader(headers, [family.signature]);
  requireValid(ctx, source.name, checkSignature(source.scheme, key, raw, signature, timestamp, ctx.deps.clock()));
  return raw;
}

/** A delivery as its source's reader gets it: the signed body, which the pipeline parsed (a JSON object, or a form
 * where the record takes one), and its event header. */
export interface Received { body: Obj; form: URLSearchParams | null; raw: Buffer; resource: string | undefined }

/** Work a delivery asks for, as its source's reader decides it; intake routes it, makes its brief and queues it. Its
 * brief's text (the source's sanitizer, briefOf, makes the brief of it) is `text`, or what `prepare` returns: run once
 * the delivery is no copy of one queued (an API asked, files read). */
export type Job = JobBase & ({ text: string } | { prepare: (repo: ServedRepo) => Promise<string> });

interface JobBase {
  kind: 'job';
  /** What routes it (served-repos.ts): a repository's full name, an operator-mapped key, a chat channel. */
  route: string | null;
  /** A chat's `repo=` choice among its channel's repositories. */
  pick?: string | null;
  /** Sent from a vendor account the operator's pin does not name (`pinnedIn`): it reaches no repository. */
  stranger?: boolean | undefined;
  keys?: readonly string[];
  reply?: EnqueueRequest['reply'];
  replies?: Replies;
  /** How a delivery no served repository takes is answered (a skip unless given). */
  unserved?: (reason: string) => Reply;
  /** Run once the delivery is answered, whatever the answer (a staged file no job kept is removed). */
  done?: () => Promise<void>;
}

/** A source's reading of a delivery: a job, a skip, its own answer, or its own act on the repository it routes to. */
export type Decision =
  | Job
  | { kind: 'skip'; reason: string }
  | { kind: 'reply'; reply: Reply | Promise<Reply> }
  | { kind: 'routed'; route: string | null; then: (repo: ServedRepo) => Reply | Promise<Reply> };

export type Reader = (ctx: TCtx, delivery: Received) => Decision;

/**
 * Whether a delivery was sent for an account `pin` names (settings.ts `pinOf`: a chata workspace, a Sentry
 * installation, a Linear organization, a Jira site), by any of the `ids` its signed body gives for it; a null pin
 * (unset) passes every account. One signing secret may serve many accounts, whose routing keys are each only theirs.
 */
export function pinnedIn(pin: ReadonlySet<string> | null, ...ids: readonly (string | null | undefined)[]): boolean {
  return pin === null || ids.some((id) => typeof id === 'string' && pin.has(id));
}

/** A delivery its route's `verify` (admit) passed: the signed body's time, the reader, and what its decision asks. */
export function receive(ctx: TCtx, source: ReadSource, read: Reader): Reply | Promise<Reply> {
  const raw = ctx.raw ?? Buffer.alloc(0);
  if (ctx.body === undefined && !('forms' in source)) {
    throw new HttpError('unsupported_media_type', 'The body is a form (name=…), not JSON: set the webhook\'s Content '
      + 'type to application/json (GitHub: Settings → Webhooks)');
  }
  const form = ctx.body === undefined ? new URLSearchParams(raw.toString('utf8')) : null;
  const body = (ctx.body ?? {}) as Obj;
  if ('bodyTime' in source) {
    const { field, form: when } = source.bodyTime;
    requireValid(ctx, source.name, checkBodyTime(when, body[field], ctx.deps.clock()));
  }
  const resource = firstHeader(ctx.req.headers, 'resource' in source ? source.resource : undefined);
  return act(ctx, source, read(ctx, { body, form, raw, resource }));
}

function routeOf(ctx: TCtx, source: ReadSource, d: Job | Extract<Decision, { kind: 'routed' }>): Routed {
  const { repos } = ctx.deps.settings;
  if (source.routing === 'full-name') return repos.webhook(d.route);
  const stranger = 'stranger' in d && d.stranger === true;
  if (source.routing === 'channel') return repos.chat(source.name, d.route, ('pick' in d && d.pick) || null, stranger);
  return repos.route(source.name, d.route, stranger);
}

// Not `async`: a ready job goes to the queue with no promise of its own.
function act(ctx: TCtx, source: ReadSource, d: Decision): Reply | Promise<Reply> {
  if (d.kind === 'skip') return skipped(d.reason);
  if (d.kind === 'reply') return d.reply;
  const routed = routeOf(ctx, source, d);
  if (routed.kind === 'unserved') {
    return unserved(ctx, source.name, routed.reason, d.kind === 'job' ? d.unserved : undefined);
  }
  if (d.kind === 'routed') return d.then(routed.repo);
  const { repo } = routed;
  const intake = { origin: source.name, repo: repo.name, reply: d.reply, keys: d.keys };
  const { done } = d;
  const made = 'prepare' in d
    ? { prepare: async () => ({ brief: briefOf(source.name, await d.prepare(repo)) }) }
    : { brief: briefOf(source.name, d.text) };
  const reply = enqueue(ctx, { ...intake, ...made }, d.replies);
  return done ? reply.finally(done) : reply;
}

/** Why a delivery was refused (null: it passed), for the log; the caller gets 401 invalid_signature for any. */
type Refusal =
  | 'missing_signature' | 'malformed_signature' | 'bad_signature' | 'missing_timestamp' | 'stale_timestamp' | null;

/** ±300 s (spec "Limits"). */
const WINDOW_MS = 300_000;

function withinWindow(whenMs: number, nowMs: number): Refusal {
  return Number.isFinite(whenMs) && Math.abs(nowMs - whenMs) <= WINDOW_MS ? null : 'stale_timestamp';
}

/** `timestamp` null where the scheme signs none; the MAC before the clock, so a forgery learns nothing from order. */
export function checkSignature(
  scheme: Scheme, key: string | Buffer, raw: Buffer, signature: Header, timestamp: Header | null, nowMs: number,
): Refusal {
  const sig = signature?.trim();
  if (!sig) return 'missing_signature';
  const ts = timestamp === null ? null : timestamp?.trim() ?? '';
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

/** A signed body's time: trackera's `webhookTimestamp` (unix ms) or chatb's Activity `timestamp` (ISO-8601). */
export function checkBodyTime(form: 'ms' | 'iso', value: unknown, nowMs: number): Refusal {
  if (form === 'ms') return typeof value === 'number' ? withinWindow(value, nowMs) : 'missing_timestamp';
  const when = typeof value === 'string' && value.length <= 64 ? Date.parse(value) : NaN;
  return Number.isNaN(when) ? 'missing_timestamp' : withinWindow(when, nowMs);
}

/** What the operator checks after a refusal: the secret, the clock, or what reached svc. */
function refusalNext(route: SourceName, reason: Exclude<Refusal, null>): string {
  if (reason === 'missing_timestamp') {
    return 'the delivery carries no signed time, or one that is not a time: the sender always sends it, so this one '
      + 'did not come from the sender as sent (or a proxy on the way dropped or changed it); '
      + `check what posts to /${route}`;
  }
  if (reason === 'stale_timestamp') {
    return 'the signed time is more than 300 s from this host\'s clock: check the clock (NTP); '
      + 'a delivery replayed later is refused on purpose';
  }
  const variables = sourceOf(route).secret.join(' or ');
  return `check that ${variables} holds the secret the sender signs with, and that the sender posts to /${route}`;
}

/** 401 with nothing queued; the log says which check failed, the caller learns only that it failed. */
function requireValid(ctx: TCtx, route: SourceName, reason: Refusal): void {
  if (reason === null) return;
  const next = refusalNext(route, reason);
  ctx.deps.log.warn('webhook refused', { route, reason, next, request_id: ctx.requestId, peer: ctx.peer });
  throw new HttpError('invalid_signature', 'Signature is missing, wrong or stale');
}

/** Thrown by an intake's `prepare` when its delivery asks for nothing its sender may have: answered 200 skipped. */
export class NotQueued extends Error {}

function skipped(reason: string): Reply {
  return json(200, { status: 'skipped', reason });
}

/** A delivery no served repository takes: counted for GET /status, logged, answered as a skip (not retried). */
function unserved(ctx: TCtx, route: SourceName, reason: string, answer = skipped): Reply {
  ctx.deps.skips.count(route);
  ctx.deps.log.info('delivery skipped: repository not served', { route, reason, request_id: ctx.requestId });
  return answer(reason);
}

interface Replies {
  queued: (jobId: string) => Reply;
  duplicate?: (jobId: string) => Reply;
}

export const accepted: Replies = { queued: (jobId) => json(202, { job_id: jobId, status: 'queued' }) };

/** A job's brief, and its argv where the source's record has none (`jobs`) or records decide it (a follow-up). */
type Made = { brief: string; args?: string[] };

// A checked delivery: its keys besides the body hash and delivery id, and its brief or, where building that reads
// files or starts a child, `prepare` (run only once the cheap checks let it).
export type Intake = Pick<EnqueueRequest, 'origin' | 'repo' | 'reply'> & { keys?: readonly string[] }
  & (Made | { prepare: () => Promise<Made> });

function full(ctx: TCtx, origin: SourceName): HttpError {
  ctx.deps.log.warn('queue share full', { route: origin, request_id: ctx.requestId });
  return new HttpError('too_many_requests', `The job queue has no room for /${origin} deliveries; try again later`, {
    'retry-after': '30',
  });
}

function duplicate(ctx: TCtx, origin: SourceName, jobId: string, replies: Replies): Reply {
  ctx.deps.log.info('duplicate delivery', { route: origin, job_id: jobId });
  return replies.duplicate?.(jobId) ?? json(200, { status: 'duplicate' });
}

// A repeat or a full share is answered before `prepare` runs; then the job, keys and reply target commit together.
// Not `async`: a ready job goes to the queue with no promise of its own.
export function enqueue(ctx: TCtx, intake: Intake, replies: Replies = accepted): Promise<Reply> {
  const dedupeKeys = deliveryKeys(intake.origin, ctx.req.headers, ctx.raw, ...(intake.keys ?? []));
  const delivery = startDelivery(ctx.deps.tracer, ctx.req, intake.origin, intake.repo);
  // A ready job's transaction makes the same checks: no look before it.
  if ('brief' in intake) return commit(ctx, intake, intake, dedupeKeys, replies, delivery);
  return prepareThenCommit(ctx, intake, dedupeKeys, replies, delivery);
}

async function prepareThenCommit(
  ctx: TCtx, intake: Extract<Intake, { prepare: unknown }>, dedupeKeys: string[], replies: Replies,
  delivery: Delivery,
): Promise<Reply> {
  const admission = await ctx.deps.queue.admit(intake.origin, dedupeKeys);
  if (admission.kind === 'full') {
    delivery.span?.end('unset', { 'svc.outcome': 'full', 'svc.job_id': null });
    throw full(ctx, intake.origin);
  }
  if (admission.kind === 'duplicate') {
    delivery.span?.end('unset', { 'svc.outcome': 'duplicate', 'svc.job_id': admission.jobId });
    return duplicate(ctx, intake.origin, admission.jobId, replies);
  }
  try {
    return await commit(ctx, intake, await intake.prepare(), dedupeKeys, replies, delivery);
  } catch (err) {
    // `prepare` skipped the delivery, refused it (a follow-up's refusal, answered by its source) or failed: no job,
    // and the delivery's span still ends.
    const skip = err instanceof NotQueued;
    const outcome = skip ? 'skipped' : err instanceof RefusedError ? 'refused' : 'not_queued';
    delivery.span?.end(outcome === 'not_queued' ? 'error' : 'unset', { 'svc.outcome': outcome, 'svc.job_id': null });
    if (skip) return skipped(err.message);
    throw err;
  } finally {
    admission.release();
  }
}

function commit(
  ctx: TCtx, intake: Intake, { brief, args: made }: Made, dedupeKeys: string[], replies: Replies, delivery: Delivery,
): Promise<Reply> {
  const { origin, repo, reply } = intake;
  const args = made ?? sourceOf(origin).argv!.map((a) => (a === BRIEF ? brief : a));
  const request = { origin, repo, brief, args, dedupeKeys, reply, trace: delivery.job };
  return ctx.deps.queue.enqueue(request).then((result) => {
    delivery.span?.end('unset', { 'svc.outcome': result.kind, 'svc.job_id': 'jobId' in result ? result.jobId : null });
    if (result.kind === 'full') throw full(ctx, origin);
    if (result.kind === 'duplicate') return duplicate(ctx, origin, result.jobId, replies);
    return queuedReply(replies.queued(result.jobId));
  });
}
