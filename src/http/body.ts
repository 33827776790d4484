// Reads a request body once, as bytes, counting as they arrive (chunked bodies have no length), and parses it.
import { isJsonObject } from '../untrusted.ts';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http-error.ts';

export const MiB = 1024 * 1024;

const tooLarge = (limit: number) => new HttpError('payload_too_large', `Request body is larger than ${limit} bytes`);

/** `timeoutMs`: the total time a body may take, so one that trickles in (slowloris) is refused. */
export function readBody(
  req: IncomingMessage, { limit, timeoutMs = 30_000 }: { limit: number; timeoutMs?: number },
): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  // A refused body is never drained (resume() would read it all): the pipeline answers and closes the connection.
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const tooSlow = () => finish(new HttpError('bad_request', 'Request body took too long to arrive'));
    const timer = setTimeout(tooSlow, timeoutMs);
    timer.unref();
    function finish(error: Error | null): void {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      if (error) {
        req.pause();
        reject(error);
      } else {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      }
    }
    function onData(chunk: Buffer): void {
      size += chunk.length;
      if (size > limit) finish(tooLarge(limit));
      else chunks.push(chunk);
    }
    const onEnd = (): void => finish(null);
    const onError = (err: Error): void =>
      finish(new HttpError('bad_request', `Request body could not be read: ${err.message}`));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

// Nesting limit for every JSON request body, checked by a flat byte scan before JSON.parse, so no parser, canonical
// serialiser or reader downstream ever recurses into a hostile `[[[[…]]]]` (docs/control-data.md).
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/**
 * The deepest array/object nesting in the text, counting brackets outside strings only; bytes compared with constants
 * (a `Set` lookup per byte cost more than JSON.parse itself on a 9 KB webhook).
 */
export function jsonDepth(bytes: Uint8Array): number {
  let depth = 0;
  let deepest = 0;
  const n = bytes.length;
  for (let i = 0; i < n; i++) {
    const b = bytes[i]!;
    if (b === QUOTE) {
      // Inside a string: a backslash escapes the next byte, a quote ends it (unterminated: the rest is string).
      for (i++; i < n; i++) {
        const c = bytes[i]!;
        if (c === QUOTE) break;
        if (c === BACKSLASH) i++;
      }
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > deepest) deepest = depth;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
  }
  return deepest;
}

/**
 * Whether the text nests deeper than MAX_JSON_DEPTH. It cannot with no more `[` and `{` bytes than that, which
 * Buffer.indexOf (memchr) counts in a fraction of the byte scan's time: a 2.6 KB GitHub delivery has 11 (0.4 µs
 * against 3 µs, docs/bench.md). Only a body with more is scanned.
 */
function nestsTooDeep(bytes: Buffer): boolean {
  const objects = count(bytes, OPEN_OBJECT, MAX_JSON_DEPTH + 1);
  if (objects + count(bytes, OPEN_ARRAY, MAX_JSON_DEPTH + 1 - objects) <= MAX_JSON_DEPTH) return false;
  return jsonDepth(bytes) > MAX_JSON_DEPTH;
}

/** How many times `byte` occurs in the text, counted no further than `max`. */
function count(bytes: Buffer, byte: number, max: number): number {
  let n = 0;
  for (let i = bytes.indexOf(byte); i !== -1 && n < max; i = bytes.indexOf(byte, i + 1)) n++;
  return n;
}

export function parseJson(bytes: Buffer): unknown {
  if (bytes.length === 0) throw new HttpError('invalid_json', 'Request body is empty; expected JSON');
  if (nestsTooDeep(bytes)) {
    throw new HttpError('invalid_json', `Request body nests deeper than ${MAX_JSON_DEPTH} arrays/objects`);
  }
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new HttpError('invalid_json', 'Request body is not valid JSON');
  }
}

/** The request body when it is a JSON object, the shape every route takes; else 400 bad_request. */
export function requireJsonObject(value: unknown): Record<string, unknown> {
  if (!isJsonObject(value)) throw new HttpError('bad_request', 'Request body must be a JSON object');
  return value;
}

export function parseJsonObject(bytes: Buffer): Record<string, unknown> {
  return requireJsonObject(parseJson(bytes));
}

/** Longest field name a refusal repeats: the name is the sender's, so the error never echoes a megabyte of it. */
const MAX_ECHOED_KEY = 64;

/** Refuses a JSON body field the route does not take, so a typo is never silently ignored; `where` adds context. */
export function checkBodyKeys(body: Record<string, unknown>, allowed: ReadonlySet<string> | readonly string[],
  where?: string): void {
  const known: ReadonlySet<string> = allowed instanceof Set ? allowed : new Set(allowed);
  for (const key of Object.keys(body)) {
    if (known.has(key)) continue;
    const name = key.length > MAX_ECHOED_KEY ? `${key.slice(0, MAX_ECHOED_KEY)}…` : key;
    throw new HttpError('invalid_param', `Unknown field "${name}"${where ? ` ${where}` : ''}`);
  }
}
