// Validates the optional `notifications` array of an ingest body (delivery records from the trigger server) into
// store rows. The store itself cuts targets to a host and scrubs URLs from errors; this file only checks shape and
// types.
import { isJsonObject } from '../untrusted.ts';
import { HttpError } from '../http/http-error.ts';
import { NOTIFICATION_STATUSES, type NotificationInput, type NotificationStatus } from '../db/notifications-store.ts';
import { SEGMENT } from './params.ts';
import { ingestTime } from './ingest-time.ts';

function bad(where: string, what: string): never {
  throw new HttpError('invalid_param', `${where} ${what}`);
}

function text(where: string, v: unknown, required: boolean, max = 4096): string | null {
  if (v === undefined || v === null) return required ? bad(where, 'is required') : null;
  if (typeof v === 'string' && v.length > 0 && v.length <= max) return v;
  return bad(where, `must be a string of 1 to ${max} characters`);
}

function time(where: string, v: unknown, fallback: number, now: number): number {
  return v === undefined || v === null ? fallback : ingestTime(where, v, now);
}

export function validateNotification(v: unknown, where: string, source: string, now: number): NotificationInput {
  if (!isJsonObject(v)) return bad(where, 'must be an object');
  const o = v;
  if (!(NOTIFICATION_STATUSES as readonly unknown[]).includes(o.status)) {
    bad(`${where}.status`, `must be one of ${NOTIFICATION_STATUSES.join(', ')}`);
  }
  const run = o.run === undefined || o.run === null ? null : o.run;
  if (run !== null && (typeof run !== 'string' || !SEGMENT.test(run))) {
    bad(`${where}.run`, `must match ${SEGMENT.source}`);
  }
  const attempts = o.attempts ?? 0;
  if (!Number.isSafeInteger(attempts) || (attempts as number) < 0) {
    bad(`${where}.attempts`, 'must be a non-negative integer');
  }
  const created = time(`${where}.created_at`, o.created_at, now, now);
  return {
    job_id: text(`${where}.job_id`, o.job_id, false, 128),
    // A notification about a run belongs to the batch's source; one about a job alone has none.
    source: run === null ? null : source,
    run: run as string | null,
    origin: text(`${where}.origin`, o.origin, true, 64)!,
    channel: text(`${where}.channel`, o.channel, true, 64)!,
    target: text(`${where}.target`, o.target, false),
    status: o.status as NotificationStatus,
    attempts: attempts as number,
    error: text(`${where}.error`, o.error, false),
    created_at: created,
    updated_at: time(`${where}.updated_at`, o.updated_at, created, now),
  };
}
