// Text from outside made safe for a terminal or a log: no cursor moves, recolouring, retitled windows or reordered
// text (bidi overrides, "Trojan Source", CVE-2021-42574). src/cli.ts passes every print through terminalSafe.

/**
 * JSON.stringify escapes C0 controls but leaves DEL, the C1 controls (U+009B is a one-byte CSI), U+2028/U+2029 and
 * the bidi overrides and isolates raw. Outside string literals its output is plain ASCII, so each can only sit inside
 * a string, where the \uXXXX escape parses to the same character.
 */
const LEFT_RAW = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** JSON.stringify(value, null, indent) with every control, line-separator and bidi-override character escaped. */
export function safeJson(value: unknown, indent?: number): string {
  const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return JSON.stringify(value, null, indent).replace(LEFT_RAW, escape);
}

/** C0 controls but the newline, DEL, C1 and bidi controls: a tab becomes a space, the rest U+FFFD ("�[31m"). */
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => (c === '\t' ? ' ' : '\ufffd'));
}
