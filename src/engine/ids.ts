// Run ids: "r" + 26 lowercase base32 chars (48-bit ms time, then 80 random bits), so they sort by creation time.
import { randomInt } from 'node:crypto';
import { SEGMENT } from '../run-json.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** `ms` in ten base32 digits of ALPHABET (JavaScript's own base32 digits, mapped). */
export function encodeTime(ms: number): string {
  return ms.toString(32).padStart(10, '0').replace(/[0-9a-v]/g, (digit) => ALPHABET[parseInt(digit, 32)]!);
}

export function newRunId(now: number = Date.now()): string {
  return `r${encodeTime(now)}${Array.from({ length: 16 }, () => ALPHABET[randomInt(32)]).join('')}`;
}

/** DESIGN §3: both path segments of `<source>/<run>` match this pattern. */
export function isValidSegment(value: unknown): value is string {
  return typeof value === 'string' && SEGMENT.test(value);
}
