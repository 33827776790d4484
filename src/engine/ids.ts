// Run ids: "r" + 26 lowercase base32 chars (48-bit ms time, then 80 random bits), so they sort by creation time.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function newRunId(now: number = Date.now()): string {
  const bits = (BigInt(now) << 80n) | BigInt(`0x${randomBytes(10).toString('hex')}`);
  const digits = bits.toString(32).padStart(26, '0');
  return `r${Array.from(digits, (d) => ALPHABET[parseInt(d, 32)]).join('')}`;
}

/** DESIGN §3: both path segments of `<source>/<run>` match this pattern. */
export function isValidSegment(value: unknown): value is string {
  return typeof value === 'string' && SEGMENT.test(value);
}
