// JSON text that is safe to print on a terminal or in a log: JSON.stringify, with the characters it leaves raw escaped.
// Must not change what the text parses to: every escape is a valid JSON \uXXXX for the same character.

/**
 * JSON.stringify escapes C0 controls but leaves DEL and the C1 controls (U+0080–U+009F: U+009B is a one-byte CSI a
 * terminal obeys) raw, as well as U+2028/U+2029 (line breaks to JavaScript) and the bidirectional overrides and
 * isolates (they reorder what a reader sees, "Trojan Source", CVE-2021-42574). Outside string literals
 * JSON.stringify's output is plain ASCII, so each of these can only sit inside a string, where \uXXXX means the same.
 */
const LEFT_RAW = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** JSON.stringify(value, null, indent) with every control, line-separator and bidi-override character escaped. */
export function safeJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(LEFT_RAW, escapeChar);
}
