// Nesting limit for every JSON request body, checked by a flat byte scan before JSON.parse, so no parser, canonical
// serialiser or reader downstream ever recurses into a hostile `[[[[…]]]]` (docs/control-data.md).

export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * The deepest array/object nesting in the text, counting brackets outside strings only. Every request body passes
 * through here, so it compares bytes with constants (a `Set` lookup per byte cost more than JSON.parse itself on a
 * 9 KB webhook) and runs through string contents in a tight inner loop.
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
