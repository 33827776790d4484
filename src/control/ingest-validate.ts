// Turns an untrusted ingest body into typed rows, or throws 400 naming the first bad field; nothing is written here.
import { checkBodyKeys } from '../http/body.ts';
import { OCTET_STREAM } from '../http/static-files.ts';
import type { RunInput } from '../db/run-types.ts';
import { checkArtifactPath, invalidParam } from './params.ts';
import { NOTIFICATION_STATUSES, type NotificationInput } from '../db/notifications-store.ts';
import { isJsonObject, type Obj } from '../json-value.ts';
import { isRepoName } from '../engine/spec.ts';
import { RUN_KEY } from '../engine/ids.ts';
import { member, optionalTime, orNull, segment, validateEvent, validateRun } from '../engine/run-event.ts';
import { schemas } from './openapi-schemas.ts';
import { timeMs } from '../iso-time.ts';

export type IngestBatch = ReturnType<typeof validateBatch>;
type Artifact = { run: string; path: string; content_type: string; content: Buffer };

const BATCH_KEYS = new Set(Object.keys(schemas.IngestBatch.properties));
/** A served repositories file this long is a mistake, not an organisation. */
const MAX_SERVED = 1000;
// Base64's alphabet with at most two "=" at the end, in whole groups of four (checked by length): a regex repeating a
// group of four recursed past the stack on an artifact of about 3 MiB (a 500, not the batch taken).
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MIME_NAME = String.raw`[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}`;
// Only what a header may carry (RFC 9110): else serving the artifact would throw, a 500.
const MIME_PARAM = String.raw`[ \t]*;[ \t]*[A-Za-z0-9_-]+=("[\t\x20\x21\x23-\x7e]*"|[A-Za-z0-9_.+-]+)`;
const MIME = new RegExp(String.raw`^${MIME_NAME}\/${MIME_NAME}(${MIME_PARAM})*$`);

function bad(where: string, what: string): never {
  return invalidParam(`${where} ${what}`);
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

/** Shape and types only: ingest-apply cuts secrets and URL paths from errors, the store targets to a host. */
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

/**
 * A batch's run: its row, the key its runner sent with it (null: none, as from a runner before keys), and the time by
 * which its runner must have ended it (`lease_until`, null: none; a pod's seal step sends its Job's deadline plus
 * grace), which may lie in the future, unlike the row's times.
 */
function validateBatchRun(
  v: unknown, where: string, source: string, now: number,
): RunInput & { run_key: string | null; lease_until: number | null } {
  const run = validateRun(v, where, source, now);
  const key = orNull<string>(`${where}.run_key`, (v as Obj).run_key, (x) => typeof x === 'string' && RUN_KEY.test(x),
    `must match ${RUN_KEY.source} or be null`);
  const lease = (v as Obj).lease_until;
  const until = lease === undefined || lease === null ? null
    : (timeMs(lease) ?? bad(`${where}.lease_until`, 'must be an ISO-8601 time, unix milliseconds or null'));
  return { ...run, run_key: key, lease_until: until };
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
