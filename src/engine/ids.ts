// Run ids: "r" + 26 lowercase base32 chars (48-bit ms time, then 80 random bits), so they sort by creation time;
// and the run's own key, made with it.
import { hash, randomBytes, randomInt } from 'node:crypto';
import { SEGMENT } from '../run-json.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

// The last time encoded and its text: the jobs one COMMIT queues share one time (trigger/queue.ts), and the replace
// below costs ~2 µs, as much as a delivery's dedupe key (docs/bench.md).
let lastMs = NaN;
let lastText = '';

/** `ms` in ten base32 digits of ALPHABET (JavaScript's own base32 digits, mapped). */
export function encodeTime(ms: number): string {
  if (ms !== lastMs) {
    lastText = ms.toString(32).padStart(10, '0').replace(/[0-9a-v]/g, (digit) => ALPHABET[parseInt(digit, 32)]!);
    lastMs = ms;
  }
  return lastText;
}

export function newRunId(now: number = Date.now()): string {
  return `r${encodeTime(now)}${Array.from({ length: 16 }, () => ALPHABET[randomInt(32)]).join('')}`;
}

/** A run's own key (docs/control-data.md, "Each run's own runner"): 32 random bytes, base64url. */
export function newRunKey(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The key a run's worker is handed when a later runner holds the run's own key (a Kubernetes pod: the seal step makes
 * `key` where the agent cannot read it, the run container gets this): its SHA-256, base64url. The Control Plane binds
 * the run to it like any key, and moves the run onto `key` when a batch carries that (docs/control-data.md, "Each
 * run's own runner"); whoever reads this one cannot find `key` from it.
 */
export function handedRunKey(key: string): string {
  return hash('sha256', key, 'base64url');
}

/** A run key as ingest takes one: what newRunKey makes, with room for another. */
export const RUN_KEY = /^[A-Za-z0-9_-]{32,128}$/;

/** DESIGN §3: both path segments of `<source>/<run>` match this pattern. */
export function isValidSegment(value: unknown): value is string {
  return typeof value === 'string' && SEGMENT.test(value);
}
