// The one way svc writes a stored time: ISO 8601 in UTC with milliseconds (DESIGN §3); now is Date#toISOString. And
// the one way it reads a time a body, a query or a run file gives (timeMs).

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

const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

// The last time text read: the events of one ingest batch mostly carry the same one (docs/bench.md, "speed paths
// kept").
let lastReadText = '';
let lastReadMs: number | null = null;

/** Unix ms as a number, or ISO-8601 (date or date-time) or unix milliseconds as a string; else null. */
export function timeMs(value: unknown): number | null {
  if (typeof value !== 'string') return inDateRange(value);
  if (value === lastReadText) return lastReadMs;
  let ms: number;
  if (/^-?[0-9]{1,16}$/.test(value)) ms = Number(value);
  else ms = ISO.test(value) ? Date.parse(value) : Number.NaN;
  lastReadMs = inDateRange(ms);
  lastReadText = value;
  return lastReadMs;
}

/** Inside the range a Date can represent, so toISOString never throws on the way out. */
function inDateRange(ms: unknown): number | null {
  return Number.isSafeInteger(ms) && Math.abs(ms as number) <= 8.64e15 ? (ms as number) : null;
}
