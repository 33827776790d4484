// The one way svc writes a time: ISO 8601 in UTC with milliseconds (DESIGN §3), as Date#toISOString does.

/** A time in epoch milliseconds as ISO text; null stays null. */
export function iso(ms: number): string;
export function iso(ms: number | null): string | null;
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** Now (or `now`) as ISO text. */
export function isoNow(now: number = Date.now()): string {
  return new Date(now).toISOString();
}
