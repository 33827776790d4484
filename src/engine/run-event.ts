// One run event as ingest takes it (docs/control-data.md): the one check of an event, for a batch and an import
// (control/ingest-validate.ts) and for a runner's shipper (shipper.ts), which leaves out a line ingest would refuse;
// so is the check of an artifact's name.
// It throws 400 invalid_param naming the first bad field; it writes nothing.
import { HttpError } from '../http/http-error.ts';
import { MAX_JSON_DEPTH } from '../http/body.ts';
import { SEGMENT } from '../run-json.ts';
import type { EventInput } from '../db/events-store.ts';
import { isJsonObject, nestsDeeperThan } from '../untrusted.ts';
import { timeMs } from '../iso-time.ts';
import { isValidSegment } from './ids.ts';

const KIND = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** How far a body time may run ahead of the Control Plane's clock: a runner's drift, not a run parked in the future. */
export const MAX_FUTURE_MS = 5 * 60 * 1000;

function bad(where: string, what: string): never {
  throw new HttpError('invalid_param', `${where} ${what}`);
}

/**
 * Whether ingest takes an artifact at `path` (control/params.ts checkArtifactPath): relative, no empty, "." or ".."
 * segment, no NUL, no backslash (some filesystems treat it as a separator), at most 1024 characters. A runner's
 * shipper and an import leave out a file whose name it is not, rather than have the whole batch refused.
 */
export function isArtifactPath(path: string): boolean {
  return !(
    path.length === 0 ||
    path.length > 1024 ||
    path.startsWith('/') ||
    path.includes('\\') ||
    path.includes('\0') ||
    /^[A-Za-z]:/.test(path) ||
    path.split('/').some((s) => s === '' || s === '.' || s === '..')
  );
}

export function segment(where: string, v: unknown): string {
  return isValidSegment(v) ? v : bad(where, `must match ${SEGMENT.source}`);
}

export function ingestTime(where: string, v: unknown, now: number): number {
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
  const data = v.data === undefined ? '{}' : JSON.stringify(v.data);
  return {
    source,
    run: segment(`${where}.run`, v.run),
    seq: seq as number,
    ts: optionalTime(`${where}.ts`, v.ts, now) ?? now,
    kind: v.kind as string,
    data,
  };
}

/** The nesting an event may have in a batch: the body's own limit less the body object and its events array. */
const BATCH_EVENT_DEPTH = MAX_JSON_DEPTH - 2;

/**
 * Why ingest would refuse `event` (an events.jsonl line, parsed) of run `source`/… in a batch, or null: the event's
 * own check, and its nesting within the batch body's limit.
 */
export function eventRefusal(event: unknown, source: string, now: number): string | null {
  if (nestsDeeperThan(event, BATCH_EVENT_DEPTH)) return `nests deeper than ${MAX_JSON_DEPTH} arrays/objects in a batch`;
  try {
    validateEvent(event, 'event', source, now, true);
    return null;
  } catch (err) {
    if (err instanceof HttpError) return err.message;
    throw err;
  }
}
