// Run ids: "r" + 26 lowercase base32 chars (48-bit ms time, then 80 random bits), so they sort by creation time.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function encodeTime(ms: number): string {
  let out = '';
  let n = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[n % 32]! + out;
    n = Math.floor(n / 32);
  }
  return out;
}

function encodeRandom(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31]!;
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}

export function newRunId(now: number = Date.now()): string {
  return `r${encodeTime(now)}${encodeRandom(randomBytes(10))}`;
}

/** DESIGN §3: both path segments of `<source>/<run>` match this pattern. */
export function isValidSegment(value: unknown): value is string {
  return typeof value === 'string' && SEGMENT.test(value);
}
