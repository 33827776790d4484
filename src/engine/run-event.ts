// A run's row and its events as ingest takes them (docs/control-data.md): the one check of each, for a batch and an
// import (control/ingest-validate.ts) and for a runner's shipper (shipper.ts), which leaves out an event line, or cuts
// or leaves out a field of state.json, that ingest would refuse; so is the check of an artifact's name.
// It throws 400 invalid_param naming the first bad field; it writes nothing.
import { HttpError } from '../http/http-error.ts';
import {
  FAILURE_CLASSES, RUN_STATUSES, runFailure, SEGMENT, VERDICTS, type RunFailure, type RunStatus,
} from '../run-json.ts';
import type { EventInput } from '../db/events-store.ts';
import { failureColumns, type RunInput } from '../db/run-types.ts';
import { isJsonObject, MAX_JSON_DEPTH, nestsDeeperThan } from '../json-value.ts';
import { oneOf } from '../untrusted.ts';
import { timeMs } from '../iso-time.ts';
import { isValidSegment } from './ids.ts';
import { jsonWithoutSecrets, redactSecrets } from './text.ts';

const KIND = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** How far a body time may run ahead of the Control Plane's clock: a runner's drift, not a run parked in the future. */
export const MAX_FUTURE_MS = 5 * 60 * 1000;

function bad(where: string, what: string): never {
  throw new HttpError('invalid_param', `${where} ${what}`);
}

/**
 * Whether ingest takes an artifact at `path` (control/params.ts checkArtifactPath): relative, no empty, "." or ".."
 * segment, no NUL, no backslash (some filesystems treat it as a separator), at most 1024 characters, and no secret
 * redactSecrets would cut (a name goes to the Control Plane's lists, its UI and receipts, which no scrub reads again).
 * A name with a secret is refused, not cut: cut, it would name a different file, and two could become one. A runner's
 * shipper and an import leave out a file whose name it is not, rather than have the whole batch refused; the engine
 * writes none (run-context.ts saveArtifact).
 */
export function isArtifactPath(path: string): boolean {
  return !(
    path.length === 0 ||
    path.length > 1024 ||
    path.startsWith('/') ||
    path.includes('\\') ||
    path.includes('\0') ||
    /^[A-Za-z]:/.test(path) ||
    path.split('/').some((s) => s === '' || s === '.' || s === '..') ||
    redactSecrets(path) !== path
  );
}

export function segment(where: string, v: unknown): string {
  return isValidSegment(v) ? v : bad(where, `must match ${SEGMENT.source}`);
}

function ingestTime(where: string, v: unknown, now: number): number {
  const ms = timeMs(v) ?? bad(where, 'must be an ISO-8601 time or unix milliseconds');
  const minutes = MAX_FUTURE_MS / 60_000;
  if (ms > now + MAX_FUTURE_MS) bad(where, `is more than ${minutes} minutes ahead of the Control Plane's clock`);
  return ms;
}

export function optionalTime(where: string, v: unknown, now: number): number | null {
  return v === undefined || v === null ? null : ingestTime(where, v, now);
}

/**
 * `inCheckedBody`: the event came in a request body, whose own depth check (http/body.ts parseJson) already bounds its
 * data below MAX_JSON_DEPTH, so the data is not walked again (its walk was ~1 % of the fan-in server's CPU).
 */
export function validateEvent(
  v: unknown, where: string, source: string, now: number, inCheckedBody = false,
): EventInput {
  if (!isJsonObject(v)) return bad(where, 'must be an object');
  if (v.source !== undefined && v.source !== source) bad(`${where}.source`, 'must match the batch source');
  const seq = v.seq;
  if (!Number.isSafeInteger(seq) || (seq as number) < 0) bad(`${where}.seq`, 'must be a non-negative integer');
  if (typeof v.kind !== 'string' || !KIND.test(v.kind)) bad(`${where}.kind`, `must match ${KIND.source}`);
  // Checked without recursion before JSON.stringify recurses: import reads events.jsonl lines no body limit saw.
  if (!inCheckedBody && nestsDeeperThan(v.data, MAX_JSON_DEPTH)) {
    bad(`${where}.data`, `nests deeper than ${MAX_JSON_DEPTH} arrays/objects`);
  }
  // What a pod's agent or a runner wrote is scrubbed again here: a pod's events.jsonl is the agent's to rewrite.
  const data = v.data === undefined ? '{}' : jsonWithoutSecrets(v.data);
  return {
    source,
    run: segment(`${where}.run`, v.run),
    seq: seq as number,
    ts: optionalTime(`${where}.ts`, v.ts, now) ?? now,
    kind: v.kind as string,
    data,
  };
}

export function member<T>(where: string, v: unknown, allowed: readonly T[]): T {
  return oneOf(v, allowed) ?? bad(where, `must be one of ${allowed.join(', ')}`);
}

export function orNull<T>(where: string, v: unknown, ok: (x: unknown) => boolean, what: string): T | null {
  if (v === undefined || v === null) return null;
  return ok(v) ? (v as T) : bad(where, what);
}

const TRACE_ID = /^[0-9a-f]{32}$/;
/** The longest text a run's field may hold (a longer one the shipper cuts to this). */
export const MAX_TEXT = 64 * 1024;
const TEXT_FIELDS = ['repo', 'brief', 'origin', 'provider', 'branch', 'pr_url', 'question', 'error'] as const;
// No pid: a worker's process id is not the Control Plane's to record from a body or a file.
const INT_FIELDS = ['tokens_in', 'tokens_out', 'exit_code'] as const;
const COUNT_FIELDS: readonly string[] = ['tokens_in', 'tokens_out'];

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
    const text = orNull<string>(`${where}.${f}`, v[f], (x) => typeof x === 'string' && x.length <= MAX_TEXT,
      'must be a string or null');
    input[f] = text === null ? null : redactSecrets(text);
  }
  for (const f of INT_FIELDS) {
    input[f] = orNull(`${where}.${f}`, COUNT_FIELDS.includes(f) ? wholeOrNull(v[f]) : v[f], Number.isSafeInteger,
      'must be an integer or null');
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
  return { class: cls, reason: redactSecrets(v.reason as string), retryable: v.retryable as boolean };
}

/**
 * A count (tokens, calls) as the row keeps it: a number that is no safe integer is unknown (null), as the engine reads
 * one (countOrNull), not a refused batch: an older svc's command provider wrote fractional token counts, which its
 * runners still ship and `POST /v1/import` still reads. Anything else is returned for its check.
 */
function wholeOrNull(x: unknown): unknown {
  return typeof x === 'number' && !Number.isSafeInteger(x) ? null : x;
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
    // Every figure but the cost is a count: the Run JSON says integer (control/openapi-schemas.ts).
    const figure = k === 'cost_usd' ? x : wholeOrNull(x);
    if (keys.includes(k) || typeof figure === 'number') out[k] = typeof figure === 'number' ? figure : null;
  }
  return JSON.stringify(out);
}

/** The nesting an event may have in a batch: the body's own limit less the body object and its events array. */
const BATCH_EVENT_DEPTH = MAX_JSON_DEPTH - 2;

/**
 * Why ingest would refuse `event` (an events.jsonl line, parsed) of run `source`/… in a batch, or null: the event's
 * own check, and its nesting within the batch body's limit.
 */
export function eventRefusal(event: unknown, source: string, now: number): string | null {
  if (nestsDeeperThan(event, BATCH_EVENT_DEPTH)) return `nests deeper than ${MAX_JSON_DEPTH} arrays/objects in a batch`;
  return refusal(() => validateEvent(event, 'event', source, now, true));
}

/** Why ingest would refuse `row` (a run's row as its batch of source `source` carries it), or null. */
export function runRefusal(row: unknown, source: string, now: number): string | null {
  return refusal(() => validateRun(row, 'state.json', source, now));
}

/** The message of the refusal `check` throws, or null when it passes. */
function refusal(check: () => unknown): string | null {
  try {
    check();
    return null;
  } catch (err) {
    if (err instanceof HttpError) return err.message;
    throw err;
  }
}

/**
 * What a Kubernetes pod's run container (where its agent runs and can write the run folder and read the token) never
 * says of its run, since svc says it only after the agent, and in a pod that is the signer (src/pod/sign.ts; DESIGN
 * §7a "It can't vouch for itself"): the run's success, its verdict and pull request, a `receipt` or `pr` line, the
 * receipt and the gate's egress.jsonl. Ingest refuses a `bound-runs` batch naming one (docs/control-data.md, "Only
 * the signer's word"), the run container's shipper leaves them out of its batches, and the signer copies none of them.
 */
const SIGNER_KINDS: ReadonlySet<string> = new Set(['receipt', 'pr']);
export const SIGNER_ARTIFACTS: ReadonlySet<string> = new Set(['receipt.json', 'egress.jsonl']);
/**
 * Kinds a pod's run container writes that read as svc's evidence: its provider's reported cost and its own gate's
 * connections (its signer states both from the shared gate), its checks and its errors (the run page's timeline draws
 * them; the signer's receipt says which checks it vouches for). Stored marked as its word (`by`, RUN_CONTAINER,
 * whatever `by` the line had), so none reads as the gate's or svc's (the run page and `svc runs logs` label it the run
 * container's); nothing counts a line (totals read the run's row).
 */
const MARKED_KINDS: ReadonlySet<string> = new Set(['cost', 'egress', 'check', 'error']);
/** The `log` streams that are an agent's own output, shown as the line's tag unmarked; any other is marked. */
const AGENT_STREAMS: ReadonlySet<unknown> = new Set(['stdout', 'stderr']);
/** The `by` of a line ingest marked as a pod's run container's word: shown as its, never svc's (cli/run-logs.ts). */
export const RUN_CONTAINER = 'run-container';

/** Whether only the signer says an event of `kind` (ingest refuses a run container's, the shipper and the signer's
 * copy leave it out). */
export function isSignerKind(kind: string): boolean {
  return SIGNER_KINDS.has(kind);
}

/**
 * The `data` of a pod's run container's event of `kind` (not a signer's kind) as the Control Plane keeps it: marked as
 * the run container's word when it is one of MARKED_KINDS, or a `log` line of a stream other than the
 * agent's stdout or stderr (one of `svc`, `receipt`, `pr` would read as svc's own line); else `data` itself. Data
 * that is no object is kept, marked, as `value`: the mark alone would lose what the run container said.
 */
export function runContainerData(kind: string, data: unknown): unknown {
  const fields = data === undefined ? {} : isJsonObject(data) ? data : null;
  const marked = MARKED_KINDS.has(kind) || (kind === 'log' && !AGENT_STREAMS.has(fields?.stream));
  if (!marked) return data;
  return fields ? { ...fields, by: RUN_CONTAINER } : { value: data, by: RUN_CONTAINER };
}

/** Each field of a run's row only a pod's signer sets: whether `v` says it, and the field's value without it. */
const SIGNER_FIELDS: ReadonlyArray<[string, (v: unknown) => boolean, unknown]> = [
  ['status', (v) => v === 'succeeded', 'running'],
  ['verdict', (v) => v != null, null],
  ['pr_url', (v) => v != null, null],
];

/** The fields of `row` only a pod's signer sets: `status` when it says succeeded, a `verdict`, a `pr_url`. */
export function signerFields(row: object): string[] {
  const fields = row as Readonly<Record<string, unknown>>;
  return SIGNER_FIELDS.filter(([field, says]) => says(fields[field])).map(([field]) => field);
}

/** A stop no one asked through the Control Plane, as a run container's row says it, and what it is stored as. */
const UNASKED_STOP: Readonly<Partial<Record<RunStatus, RunStatus>>> = { stopped: 'failed', stopping: 'running' };

/** An asked stop's reason when the run container's row gives none. */
const ASKED_STOP = 'stopped by a stop asked through the Control Plane';

/**
 * What ingest keeps of a pod's run container's row (a `bound-runs` batch's; signerFields are refused before this),
 * `bound` being the run's stored row, which its seal step stored; docs/control-data.md "Only the signer's word" says
 * field by field what is kept, dropped or marked. A stop is the Control Plane's to say (`stopAsked`: one was asked for
 * the run): asked, a `stopped` row ends the run `stopped`, its class forced to `stopped` whatever the row gives; not
 * asked, a `stopped` row is stored `failed` and a `stopping` one `running`; a run stored `failed` whose row's class was
 * `stopped` gets class `infra` (retryable), never `stopped`; ingest-apply.ts keeps later rows from making an ended run
 * live again. The cost is only the signer's.
 */
export function runContainerRow(
  row: RunInput, bound: Pick<RunInput, 'repo' | 'group_id' | 'started_at' | 'origin' | 'trace_id'>, stopAsked: boolean,
): RunInput {
  const status = (stopAsked ? undefined : UNASKED_STOP[row.status]) ?? row.status;
  const ended = status === 'failed' || status === 'stopped';
  const failure = status === 'stopped' ? failureColumns(runFailure('stopped', row.failure_reason ?? ASKED_STOP))
    : status === 'failed' && row.failure_class === 'stopped' ? { failure_class: 'infra' as const, failure_retryable: 1 }
      : {};
  return {
    ...row, status, repo: bound.repo ?? null, group_id: bound.group_id ?? row.run,
    origin: bound.origin ?? row.origin ?? null, trace_id: bound.trace_id ?? row.trace_id ?? null,
    question: status === 'blocked' ? (row.question ?? null) : null,
    ...(ended ? failure : failureColumns(null)), error: ended ? (row.error ?? null) : null,
    // Never before the run's start, which the seal step stored before any agent code ran (upsert keeps it).
    ended_at: ended && typeof row.ended_at === 'number' ? Math.max(row.ended_at, bound.started_at) : null,
    metered: null, cost_usd: null, tokens_in: null, tokens_out: null,
  };
}

/** `row` without what only a pod's signer sets (signerFields): a success reads as running, as the run container's own
 * rows are until its end. */
export function withoutSignerFields<T extends object>(row: T): T {
  const out = { ...row } as Record<string, unknown>;
  for (const [field, says, without] of SIGNER_FIELDS) if (says(out[field])) out[field] = without;
  return out as T;
}
