// Shared request-parameter parsing for Control Plane handlers: path segments, limit, times, strict query keys, cursors.
// Every bad value is 400 invalid_param naming the parameter (DESIGN §3, §4); a run named but not stored is 404.
import { HttpError } from '../http/http-error.ts';
import type { RunKey, RunRow } from '../db/run-types.ts';
import type { RunsStore } from '../db/runs-store.ts';

/** DESIGN §3: both `<source>` and `<run>` path segments. */
export const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;

export function checkSegment(name: string, value: unknown): string {
  if (typeof value !== 'string' || !SEGMENT.test(value)) {
    throw new HttpError('invalid_param', `Parameter "${name}" must match ${SEGMENT.source}`);
  }
  return value;
}

export function runParams(ctx: { params: Record<string, string> }): { source: string; run: string } {
  return { source: checkSegment('source', ctx.params.source), run: checkSegment('run', ctx.params.run) };
}

/** `value` when it is one of `allowed`, else 400 naming `name` and the choices. */
export function parseEnum<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new HttpError('invalid_param', `Parameter "${name}" must be one of ${allowed.join(', ')}`);
}

/** The run a request names, else 404 not_found. */
export function storedRun(runs: Pick<RunsStore, 'get'>, { source, run }: { source: string; run: string }): RunRow {
  const row = runs.get(source, run);
  if (!row) throw new HttpError('not_found', `Run ${source}/${run} not found`);
  return row;
}

/** Strict query policy: an unknown parameter is a typo the caller wants to hear about, not a silent no-op. */
export function checkQueryKeys(query: URLSearchParams, allowed: readonly string[]): void {
  for (const key of query.keys()) {
    if (!allowed.includes(key)) throw new HttpError('invalid_param', `Unknown query parameter "${key}"`);
  }
  for (const key of allowed) {
    if (query.getAll(key).length > 1) {
      throw new HttpError('invalid_param', `Query parameter "${key}" is given more than once`);
    }
  }
}

/** `limit`: default 50, above 500 clamped to 500, anything but a positive integer → 400. */
export function parseLimit(value: string | null): number {
  if (value === null) return DEFAULT_LIMIT;
  if (!/^[0-9]{1,15}$/.test(value) || Number(value) < 1) {
    throw new HttpError('invalid_param', 'Parameter "limit" must be a positive integer');
  }
  return Math.min(Number(value), MAX_LIMIT);
}

const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** Unix ms as a number, or ISO-8601 (date or date-time) or unix milliseconds as a string; else null. */
export function timeMs(value: unknown): number | null {
  let ms = value;
  if (typeof value === 'string') {
    if (/^-?[0-9]{1,16}$/.test(value)) ms = Number(value);
    else ms = ISO.test(value) ? Date.parse(value) : Number.NaN;
  }
  // Inside the range a Date can represent, so toISOString never throws on the way out.
  return Number.isSafeInteger(ms) && Math.abs(ms as number) <= 8.64e15 ? (ms as number) : null;
}

/** timeMs of a query parameter; anything else is 400 naming `name`. */
export function parseTime(name: string, value: string): number {
  const ms = timeMs(value);
  if (ms === null) {
    throw new HttpError('invalid_param', `Parameter "${name}" must be an ISO-8601 time or unix milliseconds`);
  }
  return ms;
}

/** parseTime for an optional query parameter. */
function optionalTime(query: URLSearchParams, name: string): number | undefined {
  const value = query.get(name);
  return value === null ? undefined : parseTime(name, value);
}

/** `since` (inclusive) and `until` (exclusive) start times and `repo`: the window of the runs list and the stats. */
export function parseWindow(query: URLSearchParams): { since?: number; until?: number; repo?: string } {
  const since = optionalTime(query, 'since');
  const until = optionalTime(query, 'until');
  const repo = query.get('repo');
  if (repo !== null && (repo.length === 0 || repo.length > 512)) {
    throw new HttpError('invalid_param', 'Parameter "repo" must be 1 to 512 characters');
  }
  return {
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
    ...(repo !== null ? { repo } : {}),
  };
}

/** A non-negative integer id (event cursors, Last-Event-ID). */
export function parseId(name: string, value: string): number {
  if (!/^[0-9]{1,15}$/.test(value)) {
    throw new HttpError('invalid_param', `Parameter "${name}" must be a non-negative integer`);
  }
  return Number(value);
}

/**
 * An artifact path as recorded for a run: relative, `/`-separated, no empty, `.` or `..` segments,
 * no NUL or backslash (which some filesystems treat as a separator).
 */
export function checkArtifactPath(path: string, name = 'Artifact path'): string {
  const bad =
    path.length === 0 ||
    path.length > 1024 ||
    path.startsWith('/') ||
    path.includes('\\') ||
    path.includes('\0') ||
    /^[A-Za-z]:/.test(path) ||
    path.split('/').some((s) => s === '' || s === '.' || s === '..');
  if (bad) throw new HttpError('invalid_param', `${name} must be relative with no "..", NUL or backslash`);
  return path;
}

/** The runs list's opaque keyset cursor: base64url of JSON [started_at, source, run] of the last row sent. */
export function encodeRunCursor(key: RunKey): string {
  return Buffer.from(JSON.stringify([key.started_at, key.source, key.run])).toString('base64url');
}

/** Anything but a cursor this server made is 400 invalid_param: a client must not guess its way into the index. */
export function decodeRunCursor(text: string): RunKey {
  const bad = (): never => {
    throw new HttpError('invalid_param', 'Parameter "cursor" is not a cursor this server issued');
  };
  if (text.length > 400 || !/^[A-Za-z0-9_-]+$/.test(text)) return bad();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return bad();
  }
  if (!Array.isArray(value) || value.length !== 3) return bad();
  const [startedAt, source, run] = value as unknown[];
  if (!Number.isSafeInteger(startedAt) || typeof source !== 'string' || typeof run !== 'string') return bad();
  if (!SEGMENT.test(source) || !SEGMENT.test(run)) return bad();
  return { started_at: startedAt as number, source, run };
}

/** The audit and notification lists' cursors: base64url of a tagged integer tuple. */
export function encodeCursor(tag: string, parts: readonly number[]): string {
  return Buffer.from(`${tag}:${parts.join(':')}`, 'utf8').toString('base64url');
}

/** Decodes a cursor this server issued for `tag` with `count` integers; anything else is 400 invalid_param. */
export function decodeCursor(tag: string, count: number, text: string | null): number[] | null {
  if (text === null) return null;
  const bad = new HttpError('invalid_param', 'Parameter "cursor" is not a cursor this list issued');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) throw bad;
  const fields = Buffer.from(text, 'base64url').toString('utf8').split(':');
  if (fields.length !== count + 1 || fields[0] !== tag) throw bad;
  const parts = fields.slice(1).map((f) => (/^[0-9]{1,16}$/.test(f) ? Number(f) : Number.NaN));
  if (!parts.every(Number.isSafeInteger)) throw bad;
  return parts;
}
