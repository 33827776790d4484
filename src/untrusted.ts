// Typed readers for untrusted JSON (webhook bodies, ingest, agent output): they only look at a value's type,
// never call a method on it, so `{"toString": 1}` or `{"type": {"toString": null}}` cannot crash a handler; and the
// nesting limit such JSON is held to, before and after it is parsed.

export type Obj = Record<string, unknown>;

/** Whether the value is a plain JSON object (not null, not an array): the one test behind "must be a JSON object". */
export function isJsonObject(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

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

/**
 * Whether a parsed value nests arrays/objects deeper than `max` (a scalar is depth 0, `[]` is 1). Its own stack: even
 * a value parsed with no depth check (import) cannot overflow ours.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.value === null || typeof top.value !== 'object') continue;
    const depth = top.depth + 1;
    if (depth > max) return true;
    const children: unknown[] = Array.isArray(top.value) ? top.value : Object.values(top.value);
    for (const child of children) if (child !== null && typeof child === 'object') stack.push({ value: child, depth });
  }
  return false;
}

// Nesting limit for every JSON request body, checked by a flat byte scan before JSON.parse, so no parser, canonical
// serialiser or reader downstream ever recurses into a hostile `[[[[…]]]]` (docs/control-data.md); a value parsed
// without that scan is walked by `nestsDeeperThan` above.
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * The deepest array/object nesting in the text, counting brackets outside strings only; bytes compared with constants
 * (a `Set` lookup per byte cost more than JSON.parse itself on a 9 KB webhook).
 */
export function jsonDepth(bytes: Uint8Array): number {
  let depth = 0;
  let deepest = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const b = bytes[i]!;
    if (b === QUOTE) {
      // Inside a string: a backslash escapes the next byte, a quote ends it (unterminated: the rest is string).
      for (i++; i < n; i++) {
        const c = bytes[i]!;
        if (c === QUOTE) break;
        if (c === BACKSLASH) i++;
      }
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > deepest) deepest = depth;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
  }
  return deepest;
}

/**
 * Whether the text nests deeper than MAX_JSON_DEPTH. It cannot with no more `[` and `{` bytes than that, which
 * Buffer.indexOf (memchr) counts in a fraction of the byte scan's time: a 2.6 KB GitHub delivery has 11 (0.4 µs
 * against 3 µs, docs/bench.md). Only a body with more is scanned.
 */
export function jsonTextNestsTooDeep(bytes: Buffer): boolean {
  const objects = count(bytes, OPEN_OBJECT, MAX_JSON_DEPTH + 1);
  if (objects + count(bytes, OPEN_ARRAY, MAX_JSON_DEPTH + 1 - objects) <= MAX_JSON_DEPTH) return false;
  return jsonDepth(bytes) > MAX_JSON_DEPTH;
}

/** How many times `byte` occurs in the text, counted no further than `max`. */
function count(bytes: Buffer, byte: number, max: number): number {
  let n = 0;
  for (let i = bytes.indexOf(byte); i !== -1 && n < max; i = bytes.indexOf(byte, i + 1)) n++;
  return n;
}
