// Untrusted text made one plain line (a brief, a CLI table cell, an error a reply quotes) and cut on a UTF-8 boundary:
// a leaf, since the trigger, the Control Plane, the engine and the CLI all flatten text the same way. It knows no
// source and no brief's rules (webhook-sources.ts holds those). Also the one way an error shows a value it refuses.

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

// The end of a user info's last `@`, as written or percent-encoded once or more (`%40`, `%2540`).
const LAST_AT = /^([^]*)(?:@|%(?:25)*40)/i;
// A scheme before a user info: `x://` (no user info holds `//`), or http(s) with any slashes, as Node's URL parser
// reads `http:\\u:p@h` and `http:u:p@h`. Anything else that looks like one (`u:` of `u:p@h`) may be the user's name.
const SCHEME = /^[\x00-\x20]*((?:https?:[\\/]*)|[a-z][a-z0-9+.-]*:\/\/)/i;
// Where a URL's query, fragment or `;`/`&` parameter starts, as written or percent-encoded: its values may be secrets
// (cut only after a scheme: a chat channel's `#general` is no fragment).
const PARAMS = /[?#]|%(?:25)*(?:3f|23)|[;&][^;&=/?#]*=/i;

/**
 * A value as an error or a log line may show it (a refused setting, a payload's key, a git remote): all before its last
 * `@` or `%40` left out, as an address's user info may be (a secret) in any spelling a URL parser reads it from or a
 * person writes it (`u%3Ap@h`), only a scheme before it kept; a URL's query, fragment and parameters cut; each
 * character outside printable ASCII a `?` (no line break or terminal control reaches a log); at most 120 characters.
 * A `name` (a payload's chat channel: Teams's is `19:…@thread.skype`) is no address and keeps its `@` and all else.
 */
export function shownValue(value: string, kind: 'value' | 'name' = 'value'): string {
  const printable = (text: string) => text.replace(/[^\x20-\x7e]/g, '?');
  if (kind === 'name') return printable(value).slice(0, 120);
  const at = LAST_AT.exec(value)?.[1]!.length ?? -1;
  const scheme = SCHEME.exec(value)?.[1] ?? '';
  const rest = at < 0 ? value : value.slice(at);
  const end = scheme === '' ? -1 : rest.search(PARAMS);
  const kept = printable(end < 0 ? rest : rest.slice(0, end)) + (end < 0 ? '' : '…');
  return (at < 0 ? kept : `${printable(scheme)}…${kept}`).slice(0, 120);
}
