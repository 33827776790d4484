// The one way svc writes a stored time: ISO 8601 in UTC with milliseconds (DESIGN §3); now is Date#toISOString.

export const DAY_MS = 86_400_000;

/** A time in epoch milliseconds as ISO text; null stays null. */
export function iso(ms: number): string;
export function iso(ms: number | null): string | null;
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
