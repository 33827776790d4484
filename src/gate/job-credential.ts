// Who is asking the shared gate (docs/gate.md "Job credentials"): an HMAC-SHA256 the trigger mints per job pod under
// the secret the two share (SVC_GATE_SECRET_FILE), verified in constant time.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { BadSettingError } from '../errors.ts';
import { settingFile } from '../settings-registry.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';

export interface JobIdentity {
  job: string;
  run: string;
  /** The served repository entry's name the job was routed to ('' when none). */
  repo: string;
  /** The job's span as a W3C traceparent. */
  trace?: string;
  /** The run's max_usd. */
  maxUsd?: number;
  /** ms since the epoch; set by verifyJobCredential. */
  expiresAt?: number;
}

const PREFIX = 'g1';
const MIN_SECRET_BYTES = 32;

export function readGateSecret(path: string): Buffer {
  const secret = Buffer.from(settingFile('SVC_GATE_SECRET_FILE', path).replace(/\r?\n$/, ''), 'utf8');
  if (secret.length < MIN_SECRET_BYTES) {
    const hint = 'openssl rand -hex 32';
    throw new BadSettingError(`SVC_GATE_SECRET_FILE: the secret must be at least ${MIN_SECRET_BYTES} bytes (${hint})`);
  }
  return secret;
}

function mac(secret: Buffer, payload: string): Buffer {
  return createHmac('sha256', secret).update(`svc-gate-credential\n${payload}`).digest();
}

/** `g1.<payload>.<mac>`, base64url parts: safe in a URL's userinfo and in a path segment (a run's log cuts it:
 * engine/text.ts). */
export function mintJobCredential(secret: Buffer, who: JobIdentity, expiresAt: number): string {
  const claims = { job: who.job, run: who.run, repo: who.repo, tp: who.trace, usd: who.maxUsd, exp: expiresAt };
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${PREFIX}.${payload}.${mac(secret, payload).toString('base64url')}`;
}

export function verifyJobCredential(secret: Buffer, credential: string): JobIdentity | null {
  if (credential.length > 2048) return null;
  const parts = credential.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX) return null;
  const [, payload = '', given = ''] = parts;
  if (!/^[A-Za-z0-9_-]+$/.test(payload) || !/^[A-Za-z0-9_-]+$/.test(given)) return null;
  const expected = mac(secret, payload);
  const actual = Buffer.from(given, 'base64url');
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return null;
  const o = obj(tryParseJson(Buffer.from(payload, 'base64url').toString('utf8')));
  const job = str(o.job);
  const run = str(o.run);
  const repo = typeof o.repo === 'string' ? o.repo : null;
  const exp = typeof o.exp === 'number' ? o.exp : NaN;
  if (!job || !run || repo === null || !(exp > Date.now())) return null;
  // A budget claim the gate cannot hold the run to is no credential (never read as "no budget").
  const usd = o.usd === undefined ? {} : typeof o.usd === 'number' && Number.isFinite(o.usd) && o.usd > 0
    ? { maxUsd: o.usd } : null;
  if (usd === null) return null;
  return { job, run, repo, ...(typeof o.tp === 'string' ? { trace: o.tp } : {}), ...usd, expiresAt: exp };
}

/** The credential in a `Proxy-Authorization: Basic base64(user:credential)` value (any user name), or null. */
export function credentialFromProxyAuthorization(value: string | undefined): string | null {
  if (value === undefined) return null;
  const match = /^Basic\s+([A-Za-z0-9+/=]{1,4096})\s*$/i.exec(value);
  if (!match) return null;
  const decoded = Buffer.from(match[1] ?? '', 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : decoded.slice(colon + 1);
}
