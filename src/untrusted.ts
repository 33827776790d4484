// Typed readers for untrusted JSON (webhook bodies, ingest, agent output): they only look at a value's type,
// never call a method on it, so `{"toString": 1}` or `{"type": {"toString": null}}` cannot crash a handler. What a
// JSON value is (an object, how deep it nests) is json-value.ts's, which the body parser asks before any reader runs.
import { isJsonObject, type Obj } from './json-value.ts';

/** What JSON text holds, or undefined when it is not JSON (a torn line, an upload, a file another process wrote). */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The value when it is a plain JSON object, else null. */
export function objOrNull(value: unknown): Obj | null {
  return isJsonObject(value) ? value : null;
}

/** The value when it is a plain JSON object, else an empty one. */
export function obj(value: unknown): Obj {
  return isJsonObject(value) ? value : {};
}

/** The value when it is an array, else an empty one. */
export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The value when it is a non-empty string, else null. */
export function str(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

/** A field as text: a string that is not blank, or a finite number (an id a vendor sends either way); else null. */
export function textOf(value: unknown): string | null {
  if (typeof value === 'string' && value.trim() !== '') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return null;
}

/** The value when it is one of `allowed` (a closed set: statuses, classes, kinds), else null. */
export function oneOf<T>(value: unknown, allowed: readonly T[]): T | null {
  return (allowed as readonly unknown[]).includes(value) ? (value as T) : null;
}

/** The value when it is a finite number, else 0. */
export function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** The value when it is a count: a whole number from 0 that a double holds exactly; else null. */
export function countOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}

/** The value when it is a positive whole number a double holds exactly (an issue, PR, review or line number); else
 * null. */
export function positiveInt(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : null;
}

/** A figure from untrusted output (a cost, tokens, a diffstat's lines): a finite number, not negative; else null. */
export function figure(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

/** Text for a message: strings and finite numbers as themselves, every other value by its type only. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return `${value}`;
  if (value === null || value === undefined) return `${value}`;
  return Array.isArray(value) ? 'array' : typeof value;
}
