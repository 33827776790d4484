// The one way svc writes a stored time: ISO 8601 in UTC with milliseconds (DESIGN §3); now is Date#toISOString.

export const DAY_MS = 86_400_000;

// The last time formatted: the events of one ingest batch mostly share their millisecond, and formatting it again for
// each was ~3 % of the fan-in's CPU (docs/bench.md, "speed paths kept").
let lastMs = Number.NaN;
let lastText = '';

/** A time in epoch milliseconds as ISO text; null stays null. */
export function iso(ms: number): string;
export function iso(ms: number | null): string | null;
export function iso(ms: number | null): string | null {
  if (ms === null) return null;
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}
