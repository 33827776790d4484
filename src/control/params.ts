// Request-parameter parsing for Control Plane handlers: every bad value is 400 invalid_param naming the parameter
// (DESIGN §3, §4); a run named but not stored is 404.
import { HttpError } from '../http/http-error.ts';
import { oneOf, tryParseJson } from '../untrusted.ts';
import { SEGMENT } from '../run-json.ts';
import { isValidSegment } from '../engine/ids.ts';
import type { RunRow } from '../db/run-types.ts';
import type { RunsStore } from '../db/runs-store.ts';
import { checkBodyKeys, requireJsonObject } from '../http/body.ts';
import { schemas } from './openapi-schemas.ts';
import { timeMs } from '../iso-time.ts';
import { isArtifactPath } from '../engine/run-event.ts';

export function invalidParam(message: string): never {
  throw new HttpError('invalid_param', message);
}

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;

export function checkSegment(name: string, value: unknown): string {
  if (!isValidSegment(value)) {
    invalidParam(`Parameter "${name}" must match ${SEGMENT.source}`);
  }
  return value;
}

/** A query parameter the route cannot do without: missing, it is named as missing, not as a bad value. */
export function requiredSegment(query: URLSearchParams, name: string): string {
  const value = query.get(name);
  if (value === null) invalidParam(`Parameter "${name}" is required`);
  return checkSegment(name, value);
}

export function runParams(ctx: { params: Record<string, string> }): { source: string; run: string } {
  return { source: checkSegment('source', ctx.params.source), run: checkSegment('run', ctx.params.run) };
}

export function parseEnum<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  const known = oneOf(value, allowed);
  if (known === null) invalidParam(`Parameter "${name}" must be one of ${allowed.join(', ')}`);
  return known;
}

export function storedRun(runs: Pick<RunsStore, 'get'>, { source, run }: { source: string; run: string }): RunRow {
  const row = runs.get(source, run);
  if (!row) throw new HttpError('not_found', `Run ${source}/${run} not found`);
  return row;
}

/** A JSON object body with only the fields its OpenAPI schema names (an unknown one is 400): one list for both. */
export function bodyFields(body: unknown, schema: 'StartRequest' | 'Answer' | 'RunTarget' | 'ImportRequest') {
  const fields = requireJsonObject(body);
  checkBodyKeys(fields, Object.keys(schemas[schema].properties));
  return fields;
}

export function parseLimit(value: string | null): number {
  if (value === null) return DEFAULT_LIMIT;
  if (!/^[0-9]{1,15}$/.test(value) || Number(value) < 1) invalidParam('Parameter "limit" must be a positive integer');
  return Math.min(Number(value), MAX_LIMIT);
}

/** `since` (inclusive) and `until` (exclusive) start times and `repo`: the window of the runs list and the stats. */
export function parseWindow(query: URLSearchParams): { since?: number; until?: number; repo?: string } {
  const window: { since?: number; until?: number; repo?: string } = {};
  for (const name of ['since', 'until'] as const) {
    const value = query.get(name);
    if (value === null) continue;
    window[name] = timeMs(value) ?? invalidParam(`Parameter "${name}" must be an ISO-8601 time or unix milliseconds`);
  }
  const repo = query.get('repo');
  if (repo === null) return window;
  if (repo.length === 0 || repo.length > 512) invalidParam('Parameter "repo" must be 1 to 512 characters');
  window.repo = repo;
  return window;
}

export function parseId(name: string, value: string): number {
  if (!/^[0-9]{1,15}$/.test(value)) invalidParam(`Parameter "${name}" must be a non-negative integer`);
  return Number(value);
}

export function checkArtifactPath(path: string, name = 'Artifact path'): string {
  if (!isArtifactPath(path)) invalidParam(`${name} must be relative with no "..", NUL, backslash or credential`);
  return path;
}

/** A list's opaque keyset cursor: base64url of the JSON array of the last row's key (docs/control-data.md). */
export function encodeCursor(key: ReadonlyArray<number | string>): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** The key of a cursor this server issued, else 400: a client must not guess its way into the index. */
export function decodeCursor(text: string, shape: ReadonlyArray<'int' | 'segment'>): Array<number | string> {
  const bad = (): never => {
    invalidParam('Parameter "cursor" is not a cursor this server issued');
  };
  if (text.length > 400 || !/^[A-Za-z0-9_-]+$/.test(text)) return bad();
  const key = tryParseJson(Buffer.from(text, 'base64url').toString('utf8'));
  if (!Array.isArray(key) || key.length !== shape.length) return bad();
  const fits = (part: unknown, i: number) =>
    shape[i] === 'int' ? Number.isSafeInteger(part) : isValidSegment(part);
  return key.every(fits) ? (key as Array<number | string>) : bad();
}
