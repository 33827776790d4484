// Untrusted text made one plain line (a brief, a CLI table cell, an error a reply quotes) and cut on a UTF-8 boundary:
// a leaf, since the trigger, the Control Plane, the engine and the CLI all flatten text the same way. It knows no
// source and no brief's rules (webhook-sources.ts holds those).

// C0, DEL, C1, and the Unicode line/paragraph separators and bidi controls that can disguise text in a terminal:
// what `oneLine` removes.
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

// Runs of whitespace or CONTROL other than one plain space, which is left alone (2-3x faster, docs/bench.md).
const CONTROL_CHARS = CONTROL.source.slice(1, -1);
const CHANGED_RUN = new RegExp(`[\\s${CONTROL_CHARS}]{2,}|[^\\S ]|[${CONTROL_CHARS}]`, 'g');

/**
 * The one flattening untrusted text gets (a brief; a CLI table cell): every run of whitespace, control characters and
 * bidi marks becomes one space, trimmed; past `maxBytes` of UTF-8 it is cut and ends in "...".
 */
export function oneLine(text: string, maxBytes = Infinity): string {
  const flat = text.replace(CHANGED_RUN, ' ').trim();
  // Uncapped (a brief's fold, on the webhook's way) counts no bytes.
  if (maxBytes === Infinity || Buffer.byteLength(flat) <= maxBytes) return flat;
  return `${capUtf8(flat, maxBytes - 3)}...`;
}

const encoder = new TextEncoder();

/** Cuts to at most maxBytes of UTF-8 without splitting a character (or a surrogate pair). */
export function capUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const { read } = encoder.encodeInto(text, new Uint8Array(Math.max(0, maxBytes)));
  return text.slice(0, read).trimEnd();
}
