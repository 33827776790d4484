// The structural facts about a JSON value, parsed or still text: whether it is a plain object, and how deep it nests
// (the limit every JSON body is held to, before and after it is parsed). A leaf: the request pipeline asks it before
// any typed reader (untrusted.ts) reads a field, so the walk of a request is not sent back to the readers' file.

export type Obj = Record<string, unknown>;

/** Whether the value is a plain JSON object (not null, not an array): the one test behind "must be a JSON object". */
export function isJsonObject(value: unknown): value is Obj {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
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
