// The one filter between the CLI and a terminal (src/cli.ts wraps stdout and stderr with it): no text from outside
// can move the cursor, recolour, retitle the window or rewrite what was printed. JSON is escaped by safeJson first.

/**
 * C0 controls except the newline the CLI lays out its output with, DEL, C1 controls (U+009B is a one-byte CSI), and
 * the bidirectional overrides and isolates that reorder what a reader sees (CVE-2021-42574). A tab becomes a space;
 * everything else becomes U+FFFD, so the reader sees that something was there ("\u001b[31m" shows as "�[31m").
 */
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => (c === '\t' ? ' ' : '\ufffd'));
}

/** One line of text from outside inside a table or a key/value line: every control (newlines too) becomes a space. */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]+/g, ' ').trim();
}
