// Turns an untrusted ingest body into typed rows, or throws 400 naming the first bad field; nothing is written here.
import { checkBodyKeys } from '../http/body.ts';
import { OCTET_STREAM } from '../http/static-files.ts';
import { failureColumns } from '../db/runs-store.ts';
import type { RunInput } from '../db/run-types.ts';
import { FAILURE_CLASSES, RUN_STATUSES, VERDICTS, type RunFailure, type RunStatus } from '../run-json.ts';
import { checkArtifactPath, invalidParam } from './params.ts';
import { NOTIFICATION_STATUSES, type NotificationInput } from '../db/notifications-store.ts';
import { isJsonObject, oneOf, type Obj } from '../untrusted.ts';
import { isRepoName } from '../engine/repo-name.ts';
import { RUN_KEY } from '../engine/ids.ts';
import { ingestTime, optionalTime, segment, validateEvent } from '../engine/run-event.ts';
import { schemas } from './openapi-schemas.ts';

export type IngestBatch = ReturnType<typeof validateBatch>;
type Artifact = { run: string; path: string; content_type: string; content: Buffer };

const BATCH_KEYS = new Set(Object.keys(schemas.IngestBatch.properties));
/** A served repositories file this long is a mistake, not an organisation. */
const MAX_SERVED = 1000;
// Base64's alphabet with at most two "=" at the end, in whole groups of four (checked by length): a regex repeating a
// group of four recursed past the stack on an artifact of about 3 MiB (a 500, not the batch taken).
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MAX_TEXT = 64 * 1024;
const MIME_NAME = String.raw`[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}`;
// Only what a header may carry (RFC 9110): else serving the artifact would throw, a 500.
const MIME_PARAM = String.raw`[ \t]*;[ \t]*[A-Za-z0-9_-]+=("[\t\x20\x21\x23-\x7e]*"|[A-Za-z0-9_.+-]+)`;
const MIME = new RegExp(String.raw`^${MIME_NAME}\/${MIME_NAME}(${MIME_PARAM})*$`);
const TEXT_FIELDS = ['repo', 'brief', 'origin', 'provider', 'branch', 'pr_url', 'question', 'error'] as const;
// No pid: a worker's process id is not the Control Plane's to record from a body or a file.
const INT_FIELDS = ['tokens_in', 'tokens_out', 'exit_code'] as const;

function bad(where: string, what: string): never {
  return invalidParam(`${where} ${what}`);
}

function orNull<T>(where: string, v: unknown, ok: (x: unknown) => boolean, what: string): T | null {
  if (v === undefined || v === null) return null;
  return ok(v) ? (v as T) : bad(where, what);
}

function member<T>(where: string, v: unknown, allowed: readonly T[]): T {
  return oneOf(v, allowed) ?? bad(where, `must be one of ${allowed.join(', ')}`);
}

const TRACE_ID = /^[0-9a-f]{32}$/;

export function validateRun(v: unknown, where: string, source: string, now: number): RunInput {
  if (!isJsonObject(v)) return bad(where, 'must be an object');
  const run = segment(`${where}.run`, v.run);
  if (v.source !== undefined && v.source !== source) bad(`${where}.source`, 'must match the batch source');
  const status = member(`${where}.status`, v.status, RUN_STATUSES);
  const updated = optionalTime(`${where}.updated_at`, v.updated_at, now) ?? now;
  const input: RunInput = {
    run,
    status,
    started_at: ingestTime(`${where}.started_at`, v.started_at, now),
    ended_at: optionalTime(`${where}.ended_at`, v.ended_at, now),
    // A claim to be newer than the batch's arrival buys nothing (docs/control-data.md, "Who wins an update").
    updated_at: Math.min(updated, now),
    group_id: v.group_id === undefined || v.group_id === null ? run : segment(`${where}.group_id`, v.group_id),
  };
  input.verdict = orNull(`${where}.verdict`, v.verdict, (x) => oneOf(x, VERDICTS) !== null,
    `must be one of ${VERDICTS.join(', ')} or null`);
  for (const f of TEXT_FIELDS) {
    input[f] = orNull(`${where}.${f}`, v[f], (x) => typeof x === 'string' && x.length <= MAX_TEXT,
      'must be a string or null');
  }
  for (const f of INT_FIELDS) {
    input[f] = orNull(`${where}.${f}`, v[f], Number.isSafeInteger, 'must be an integer or null');
  }
  input.cost_usd = orNull(`${where}.cost_usd`, v.cost_usd,
    (x) => typeof x === 'number' && Number.isFinite(x) && x >= 0, 'must be a non-negative number or null');
  input.reported = costJson(`${where}.reported`, v.reported, ['cost_usd', 'tokens_in', 'tokens_out']);
  input.metered = costJson(`${where}.metered`, v.metered,
    ['cost_usd', 'tokens_in', 'tokens_out', 'calls', 'unpriced', 'unknown'], ['doubtful', 'tunnels']);
  input.repo_path = orNull(`${where}.repo_path`, v.repo_path,
    (x) => typeof x === 'string' && x.startsWith('/') && !x.includes('\0'), 'must be an absolute path or null');
  Object.assign(input, failureColumns(validateFailure(`${where}.failure`, v.failure, input.status)));
  input.trace_id = orNull(`${where}.trace_id`, v.trace_id, (x) => typeof x === 'string' && TRACE_ID.test(x),
    'must be 32 lowercase hex digits (an OpenTelemetry trace id) or null');
  return input;
}

const FAILURE_KEYS = new Set(['class', 'reason', 'retryable']);
const MAX_REASON = 4096;

/** Kept only on a run that ended failed or stopped: a stale one in a state.json is not worth refusing its batch for. */
function validateFailure(where: string, v: unknown, status: RunStatus): RunFailure | null {
  if (v === undefined || v === null) return null;
  if (!isJsonObject(v)) return bad(where, 'must be an object or null');
  for (const key of Object.keys(v)) if (!FAILURE_KEYS.has(key)) bad(`${where}: unknown field "${key}"`, 'in failure');
  const cls = member(`${where}.class`, v.class, FAILURE_CLASSES);
  if (typeof v.reason !== 'string' || v.reason.length > MAX_REASON) {
    bad(`${where}.reason`, `must be a string of at most ${MAX_REASON} characters`);
  }
  if (typeof v.retryable !== 'boolean') bad(`${where}.retryable`, 'must be true or false');
  if (status !== 'failed' && status !== 'stopped') return null;
  return { class: cls, reason: v.reason as string, retryable: v.retryable as boolean };
}

/** A Run JSON cost object (reported, metered) as the JSON text the row keeps. */
/** `optional` keys are kept only when given (the metered `doubtful`, present once there is one, and `tunnels`). */
function costJson(where: string, v: unknown, keys: readonly string[], optional: readonly string[] = []): string | null {
  if (v === undefined || v === null) return null;
  if (!isJsonObject(v)) return bad(where, 'must be an object or null');
  const out: Record<string, number | null> = {};
  for (const k of [...keys, ...optional]) {
    const x = v[k];
    if (x !== null && x !== undefined && (typeof x !== 'number' || !Number.isFinite(x) || x < 0)) {
      bad(`${where}.${k}`, 'must be a non-negative number or null');
    }
    if (keys.includes(k) || typeof x === 'number') out[k] = typeof x === 'number' ? x : null;
  }
  return JSON.stringify(out);
}

export function safeContentType(value: unknown): string {
  return typeof value === 'string' && value.length <= 200 && MIME.test(value) ? value : OCTET_STREAM;
}

function validateArtifact(v: unknown, where: string): Artifact {
  if (!isJsonObject(v)) return bad(where, 'must be an object');
  const run = segment(`${where}.run`, v.run);
  if (typeof v.path !== 'string') bad(`${where}.path`, 'must be a string');
  checkArtifactPath(v.path as string, `${where}.path`);
  if (typeof v.content_base64 !== 'string' || v.content_base64.length % 4 !== 0 || !BASE64.test(v.content_base64)) {
    bad(`${where}.content_base64`, 'must be base64');
  }
  const content = Buffer.from(v.content_base64 as string, 'base64');
  return { run, path: v.path as string, content_type: safeContentType(v.content_type), content };
}

function text(where: string, v: unknown, required: boolean, max = 4096): string | null {
  if ((v === undefined || v === null) && required) bad(where, 'is required');
  return orNull(where, v, (x) => typeof x === 'string' && x.length > 0 && x.length <= max,
    `must be a string of 1 to ${max} characters`);
}

/** Shape and types only: the store cuts targets to a host and scrubs URLs from errors. */
function validateNotification(v: unknown, where: string, source: string, now: number): NotificationInput {
  if (!isJsonObject(v)) return bad(where, 'must be an object');
  const status = member(`${where}.status`, v.status, NOTIFICATION_STATUSES);
  const run = v.run === undefined || v.run === null ? null : segment(`${where}.run`, v.run);
  const attempts = orNull<number>(`${where}.attempts`, v.attempts,
    (x) => Number.isSafeInteger(x) && (x as number) >= 0, 'must be a non-negative integer') ?? 0;
  const created = optionalTime(`${where}.created_at`, v.created_at, now) ?? now;
  return {
    job_id: text(`${where}.job_id`, v.job_id, false, 128),
    // A notification about a run belongs to the batch's source; one about a job alone has none.
    source: run === null ? null : source,
    run,
    origin: text(`${where}.origin`, v.origin, true, 64)!,
    channel: text(`${where}.channel`, v.channel, true, 64)!,
    target: text(`${where}.target`, v.target, false),
    status,
    attempts,
    error: text(`${where}.error`, v.error, false),
    created_at: created,
    updated_at: optionalTime(`${where}.updated_at`, v.updated_at, now) ?? created,
  };
}

function list(body: Obj, key: string): unknown[] {
  const v = body[key];
  if (v === undefined) return [];
  return Array.isArray(v) ? v : bad(`"${key}"`, 'must be an array');
}

/** Replaces the list the batch's trigger server served; null when absent. */
function servedRepos(body: Obj): string[] | null {
  if (body.served_repos === undefined) return null;
  const items = list(body, 'served_repos');
  if (items.length > MAX_SERVED) bad('"served_repos"', `must have at most ${MAX_SERVED} items`);
  const seen = new Set<string>();
  return items.map((item, i) => {
    const where = `served_repos[${i}]`;
    if (!isJsonObject(item)) return bad(where, 'must be an object');
    for (const key of Object.keys(item)) if (key !== 'name') bad(`${where}: unknown field "${key}"`, 'in served_repos');
    const name = item.name;
    if (typeof name !== 'string' || !isRepoName(name)) return bad(`${where}.name`, 'must be a repository owner/name');
    if (seen.has(name.toLowerCase())) bad(`${where}.name`, 'is listed twice');
    seen.add(name.toLowerCase());
    return name;
  });
}

/** A batch's run: its row, and the key its runner sent with it (null: none, as from a runner before keys). */
function validateBatchRun(
  v: unknown, where: string, source: string, now: number,
): RunInput & { run_key: string | null } {
  const run = validateRun(v, where, source, now);
  const key = orNull<string>(`${where}.run_key`, (v as Obj).run_key, (x) => typeof x === 'string' && RUN_KEY.test(x),
    `must match ${RUN_KEY.source} or be null`);
  return { ...run, run_key: key };
}

/** A POST /v1/ingest body as the pipeline parsed it (parseJson: its depth checked). */
export function validateBatch(body: unknown, now: number) {
  if (!isJsonObject(body)) return bad('Body', 'must be a JSON object');
  checkBodyKeys(body, BATCH_KEYS, 'in ingest body');
  const source = segment('"source"', body.source);
  return {
    source,
    runs: list(body, 'runs').map((r, i) => validateBatchRun(r, `runs[${i}]`, source, now)),
    events: list(body, 'events').map((e, i) => validateEvent(e, `events[${i}]`, source, now, true)),
    artifacts: list(body, 'artifacts').map((a, i) => validateArtifact(a, `artifacts[${i}]`)),
    notifications: list(body, 'notifications')
      .map((n, i) => validateNotification(n, `notifications[${i}]`, source, now)),
    served_repos: servedRepos(body),
  };
}
