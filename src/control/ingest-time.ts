// Times in an ingest or import body (runs, events, notifications): how they are read, and how far ahead of the Control
// Plane's clock they may be. One home, so every field of every batch obeys the same bound (docs/control-data.md).
import { HttpError } from '../http/http-error.ts';
import { isValidMs, parseTime } from './params.ts';

/**
 * How far a body time may run ahead of the Control Plane's clock: room for a runner's clock drifting ahead, far too
 * little to park a run in the future, where no real update could ever be newer than it.
 */
export const MAX_FUTURE_MS = 5 * 60 * 1000;

/** Unix ms as a number, or an ISO-8601 / unix-ms string; 400 invalid_param when unreadable or too far ahead. */
export function ingestTime(where: string, v: unknown, now: number): number {
  let ms: number | null = isValidMs(v) ? v : null;
  if (ms === null && typeof v === 'string') {
    try {
      ms = parseTime(where, v);
    } catch {
      // named below
    }
  }
  if (ms === null) throw new HttpError('invalid_param', `${where} must be an ISO-8601 time or unix milliseconds`);
  if (ms > now + MAX_FUTURE_MS) {
    const minutes = MAX_FUTURE_MS / 60_000;
    throw new HttpError('invalid_param', `${where} is more than ${minutes} minutes ahead of the Control Plane's clock`);
  }
  return ms;
}
