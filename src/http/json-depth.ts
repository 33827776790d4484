// Nesting limit for every JSON request body, checked by a flat byte scan before JSON.parse, so no parser, canonical
// serialiser or reader downstream ever recurses into a hostile `[[[[…]]]]` (docs/control-data.md).

export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = new Set([0x5b, 0x7b]);
const CLOSE = new Set([0x5d, 0x7d]);

/** The deepest array/object nesting in the text, counting brackets outside strings only. */
export function jsonDepth(bytes: Buffer): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (OPEN.has(b)) deepest = Math.max(deepest, ++depth);
    else if (CLOSE.has(b)) depth--;
  }
  return deepest;
}
