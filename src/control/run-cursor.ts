// Opaque keyset cursor for the runs list: base64url of JSON [started_at, source, run] of the last row sent.
import { HttpError } from '../http/http-error.ts';
import type { RunKey } from '../db/run-types.ts';
import { SEGMENT } from './params.ts';

export function encodeRunCursor(key: RunKey): string {
  return Buffer.from(JSON.stringify([key.started_at, key.source, key.run])).toString('base64url');
}

/** Anything but a cursor this server made is 400 invalid_param: a client must not guess its way into the index. */
export function decodeRunCursor(text: string): RunKey {
  const bad = (): never => {
    throw new HttpError('invalid_param', 'Parameter "cursor" is not a cursor this server issued');
  };
  if (text.length > 400 || !/^[A-Za-z0-9_-]+$/.test(text)) return bad();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return bad();
  }
  if (!Array.isArray(value) || value.length !== 3) return bad();
  const [startedAt, source, run] = value as unknown[];
  if (!Number.isSafeInteger(startedAt) || typeof source !== 'string' || typeof run !== 'string') return bad();
  if (!SEGMENT.test(source) || !SEGMENT.test(run)) return bad();
  return { started_at: startedAt as number, source, run };
}
