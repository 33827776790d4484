// Run JSON as text in one pass, for the runs list: byte-identical to JSON.stringify(runToJson(row)) (a test compares
// them over odd rows), without building an object per row or a Date per time. Must not change what a run looks like.
import { iso } from '../iso-time.ts';
import { RUN_JSON_FIELDS as PUBLIC_RUN_COLUMNS } from '../run-json.ts';
import type { PublicRunTuple } from './run-types.ts';

const DAY_MS = 86_400_000;
/**
 * 9999-12-31T23:59:59.999Z: above this (and below 0) toISOString switches to ±YYYYYY years, so those take the slow
 * path.
 */
const MAX_FOUR_DIGIT_YEAR_MS = 253_402_300_799_999;
const TWO = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const THREE = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
/** 'YYYY-MM-DDT' per day number; runs of one page share a few days, so this stays tiny (cleared past 4096 days). */
const dayPrefix = new Map<number, string>();

/** Same string as new Date(ms).toISOString() (and throws the same RangeError for an invalid time). */
export function fastIso(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_FOUR_DIGIT_YEAR_MS) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  let prefix = dayPrefix.get(day);
  if (prefix === undefined) {
    if (dayPrefix.size >= 4096) dayPrefix.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    dayPrefix.set(day, prefix);
  }
  let rest = ms - day * DAY_MS;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${prefix}${TWO[h]}:${TWO[m]}:${TWO[s]}.${THREE[rest - s * 1000]}Z`;
}

/** A column value as JSON.stringify would write it inside an object (non-finite numbers become null). */
function value(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  return JSON.stringify(v) ?? 'null';
}

/** A time column as runToJson writes it: iso(ms), null stays null. */
function time(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'number') return `"${fastIso(v)}"`;
  return value(iso(v as number));
}

const TIME_COLUMNS: ReadonlySet<string> = new Set(['started_at', 'ended_at', 'updated_at']);
/** `,"name":` for every column after the first, in runToJson's key order (PUBLIC_RUN_COLUMNS is that order). */
const KEYS = PUBLIC_RUN_COLUMNS.map((c, i) => `${i === 0 ? '{' : ','}${JSON.stringify(c)}:`);
const IS_TIME = PUBLIC_RUN_COLUMNS.map((c) => TIME_COLUMNS.has(c));

/** One run (a row of PUBLIC_RUN_COLUMNS, in that order) as Run JSON text. */
export function runTupleJson(row: PublicRunTuple): string {
  let out = '';
  for (let i = 0; i < KEYS.length; i++) out += KEYS[i] + (IS_TIME[i] ? time(row[i]) : value(row[i]));
  return `${out}}`;
}
