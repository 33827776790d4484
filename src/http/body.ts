// Reads a request body once, as bytes, counting as they arrive (chunked bodies have no length), and parses it.
import { isJsonObject, jsonTextNestsTooDeep, MAX_JSON_DEPTH } from '../json-value.ts';
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

/** The body's JSON, held to MAX_JSON_DEPTH; else 400 invalid_json. */
export function parseJson(bytes: Buffer): unknown {
  if (bytes.length === 0) throw new HttpError('invalid_json', 'Request body is empty; expected JSON');
  if (jsonTextNestsTooDeep(bytes)) {
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
