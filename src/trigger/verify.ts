// Every webhook signature scheme as a pure function over raw bytes and an injected clock; nothing here parses before it
// verifies.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a delivery was refused; the handler turns any of these into 401 invalid_signature. */
export type VerifyFailure =
  | 'missing_signature' | 'malformed_signature' | 'bad_signature' | 'missing_timestamp' | 'stale_timestamp';
export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailure };

/** Signature windows are ±300 s (spec "Limits"; DESIGN §5). */
export const WINDOW_MS = 300_000;

const OK: VerifyResult = { ok: true };
function fail(reason: VerifyFailure): VerifyResult {
  return { ok: false, reason };
}

type Header = string | string[] | undefined;

function single(value: Header): string | undefined {
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

function hmac(key: string | Buffer, parts: ReadonlyArray<string | Buffer>): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** Decode, check the byte length, then compare in constant time (octokit/webhooks-methods habit). */
function matchesHex(expected: Buffer, hex: string): VerifyResult {
  if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== expected.length * 2) return fail('malformed_signature');
  const given = Buffer.from(hex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected) ? OK : fail('bad_signature');
}

function matchesBase64(expected: Buffer, b64: string): VerifyResult {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return fail('malformed_signature');
  const given = Buffer.from(b64, 'base64');
  if (given.length !== expected.length) return fail('malformed_signature');
  return timingSafeEqual(given, expected) ? OK : fail('bad_signature');
}

function withinWindow(whenMs: number, nowMs: number): boolean {
  return Number.isFinite(whenMs) && Math.abs(nowMs - whenMs) <= WINDOW_MS;
}

/**
 * errtrack: `errtrack-hook-signature` = hex HMAC-SHA256 of the body; no signed timestamp (dedupe is the replay
 * defence).
 */
export function verifyErrtrack(secret: string, raw: Buffer, signature: Header): VerifyResult {
  const sig = single(signature)?.trim();
  if (!sig) return fail('missing_signature');
  return matchesHex(hmac(secret, [raw]), sig);
}

/** chata: `v0=` + hex HMAC over `v0:<ts>:<raw>`; the timestamp header is unix seconds within ±300 s. */
export function verifyChata(
  secret: string, raw: Buffer, timestamp: Header, signature: Header, nowMs: number,
): VerifyResult {
  const sig = single(signature)?.trim();
  const ts = single(timestamp)?.trim();
  if (!sig) return fail('missing_signature');
  if (!ts) return fail('missing_timestamp');
  if (!/^\d{1,12}$/.test(ts)) return fail('missing_timestamp');
  if (!sig.startsWith('v0=')) return fail('malformed_signature');
  // Check the MAC before the clock so a forged request learns nothing from which check failed first.
  const result = matchesHex(hmac(secret, [`v0:${ts}:`, raw]), sig.slice(3));
  if (!result.ok) return result;
  return withinWindow(Number(ts) * 1000, nowMs) ? OK : fail('stale_timestamp');
}

/**
 * trackera: `TRACKERA-Signature` = hex HMAC of the raw body; the window check runs on the signed `webhookTimestamp`
 * later.
 */
export function verifyTrackeraSignature(secret: string, raw: Buffer, signature: Header): VerifyResult {
  const sig = single(signature)?.trim();
  if (!sig) return fail('missing_signature');
  return matchesHex(hmac(secret, [raw]), sig);
}

/** trackera's `webhookTimestamp` is unix milliseconds inside the signed body (see fixtures/linear-*.json). */
export function checkTrackeraTimestamp(webhookTimestamp: unknown, nowMs: number): VerifyResult {
  if (typeof webhookTimestamp !== 'number') return fail('missing_timestamp');
  return withinWindow(webhookTimestamp, nowMs) ? OK : fail('stale_timestamp');
}

/**
 * The WebSub / GitHub form, `sha256=<hex>` HMAC of the raw body: Jira's `X-Hub-Signature` and GitHub's
 * `X-Hub-Signature-256` (which header is the source's record, src/webhook-sources.ts).
 */
export function verifyHubSignature(secret: string, raw: Buffer, signature: Header): VerifyResult {
  const sig = single(signature)?.trim();
  if (!sig) return fail('missing_signature');
  if (!sig.startsWith('sha256=')) return fail('malformed_signature');
  return matchesHex(hmac(secret, [raw]), sig.slice(7));
}

/** Decodes the chatb security token; null when it is not canonical base64 (the route is then disabled). */
export function decodeChatbKey(token: string): Buffer | null {
  const t = token.trim();
  if (t.length === 0 || t.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(t)) return null;
  const key = Buffer.from(t, 'base64');
  return key.length > 0 ? key : null;
}

/** chatb: `Authorization: HMAC <base64>` = base64 HMAC of the raw body keyed by the base64-decoded token. */
export function verifyChatbSignature(key: Buffer, raw: Buffer, authorization: Header): VerifyResult {
  const header = single(authorization)?.trim();
  if (!header) return fail('missing_signature');
  const match = /^HMAC\s+(\S+)$/i.exec(header);
  if (!match) return fail('malformed_signature');
  return matchesBase64(hmac(key, [raw]), match[1]!);
}

/** chatb's Activity `timestamp` is an ISO-8601 string inside the signed body (DESIGN §5). */
export function checkChatbTimestamp(timestamp: unknown, nowMs: number): VerifyResult {
  if (typeof timestamp !== 'string' || timestamp.length > 64) return fail('missing_timestamp');
  const when = Date.parse(timestamp);
  if (!Number.isFinite(when)) return fail('missing_timestamp');
  return withinWindow(when, nowMs) ? OK : fail('stale_timestamp');
}

/** Helpers for tests and stand-ins: produce the header values a vendor would send. */
export const sign = {
  hex(secret: string | Buffer, raw: Buffer | string): string {
    return hmac(secret, [raw]).toString('hex');
  },
  chata(secret: string, raw: Buffer | string, ts: string | number): string {
    return `v0=${hmac(secret, [`v0:${ts}:`, raw]).toString('hex')}`;
  },
  chatb(token: string, raw: Buffer | string): string {
    return `HMAC ${hmac(Buffer.from(token, 'base64'), [raw]).toString('base64')}`;
  },
};
