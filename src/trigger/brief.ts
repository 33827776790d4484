// Turns untrusted text into a one-line brief for `svc start`: no control characters, capped on a UTF-8 boundary, never
// an option.

/** Default cap; each source's own is its record's `briefBytes` (src/webhook-sources.ts). */
export const DEFAULT_BRIEF_BYTES = 1500;

// C0, DEL, C1, and the Unicode line/paragraph separators and bidi controls that can disguise text in a terminal.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** True when text holds a character that `oneLine` would remove. */
export function hasControlChars(text: string): boolean {
  CONTROL.lastIndex = 0;
  const found = CONTROL.test(text);
  CONTROL.lastIndex = 0;
  return found;
}

// Whitespace and the characters of CONTROL: every run of them becomes one space in one pass over the text
// (CONTROL, then /\s+/, took two passes over every delivery's issue body, a third longer).
const SPACE_OR_CONTROL = new RegExp(`[\\s${CONTROL.source.slice(1, -1)}]+`, 'g');

/** Collapses every run of whitespace and control characters into one space and trims. */
export function oneLine(text: string): string {
  return text.replace(SPACE_OR_CONTROL, ' ').trim();
}

const encoder = new TextEncoder();
/** Scratch space for capUtf8, grown to the largest cap asked for; its bytes are never read. */
let scratch = new Uint8Array(0);

/** Cuts to at most maxBytes of UTF-8 without splitting a character (or a surrogate pair). */
export function capUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  // encodeInto stops before the first code point that would not fit and says how many UTF-16 units it took: the
  // same cut as adding up each character's UTF-8 size (a lone surrogate counts as U+FFFD's 3 bytes both ways), in
  // one native pass instead of a call per character (a 4.5 KB brief capped at 1,500 bytes: 35 → 8 µs).
  if (scratch.length < maxBytes) scratch = new Uint8Array(maxBytes);
  const { read } = encoder.encodeInto(text, scratch.subarray(0, Math.max(0, maxBytes)));
  return text.slice(0, read).trimEnd();
}

/** A brief must never be read as a flag by `svc start`: leading hyphens (and dash look-alikes) go. */
export function stripLeadingHyphens(text: string): string {
  return text.replace(/^[\s\-\u2010-\u2015\u2212]+/u, '');
}

/** The one sanitizer every origin goes through: one line, no leading hyphen, capped. */
export function sanitizeBrief(text: string, maxBytes = DEFAULT_BRIEF_BYTES): string {
  // Only the start of a long text can reach the brief, so a long issue body is cleaned from its head first: cleaning
  // a prefix gives a prefix of the cleaned whole (a whitespace run cut at the end is trimmed, nothing else changes),
  // so once the head alone is well past the cap, cutting it gives the very same brief. A 1 MiB body then costs what
  // a 3 KB one does instead of milliseconds of regex work per delivery. Otherwise (mostly whitespace) the whole text.
  const head = maxBytes * 2 + 64;
  if (text.length > head) {
    const cleaned = stripLeadingHyphens(oneLine(text.slice(0, head)));
    if (Buffer.byteLength(cleaned, 'utf8') > maxBytes + 8) return capUtf8(cleaned, maxBytes);
  }
  return capUtf8(stripLeadingHyphens(oneLine(text)), maxBytes);
}
