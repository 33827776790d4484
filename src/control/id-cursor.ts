// Opaque keyset cursors for the audit and notification lists: base64url of a tagged integer tuple; bad input is 400.
import { HttpError } from '../http/http-error.ts';

export function encodeCursor(tag: string, parts: readonly number[]): string {
  return Buffer.from(`${tag}:${parts.join(':')}`, 'utf8').toString('base64url');
}

/** Decodes a cursor this server issued for `tag` with `count` integers; anything else is 400 invalid_param. */
export function decodeCursor(tag: string, count: number, text: string | null): number[] | null {
  if (text === null) return null;
  const bad = new HttpError('invalid_param', 'Parameter "cursor" is not a cursor this list issued');
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(text)) throw bad;
  const fields = Buffer.from(text, 'base64url').toString('utf8').split(':');
  if (fields.length !== count + 1 || fields[0] !== tag) throw bad;
  const parts = fields.slice(1).map((f) => (/^[0-9]{1,16}$/.test(f) ? Number(f) : Number.NaN));
  if (!parts.every(Number.isSafeInteger)) throw bad;
  return parts;
}
