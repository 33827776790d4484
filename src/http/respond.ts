// Replies as plain data, written to the socket in one place with the security headers every response carries.
import type { ServerResponse } from 'node:http';

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** Objects are sent as JSON; strings and Buffers as-is (set content-type yourself). */
  body?: unknown;
}

/** Returned by a handler that has written the response itself (SSE streams). */
export const TAKEN_OVER = Symbol('taken-over');
export type HandlerResult = Reply | typeof TAKEN_OVER;

export const JSON_TYPE = 'application/json; charset=utf-8';
/** What sendReply adds to an object body, for JSON a handler sends as ready-made text. */
export const JSON_HEADERS = { 'content-type': JSON_TYPE, 'cache-control': 'no-store' };

/** If-None-Match (RFC 9110 §13.1.2): `*` or a list of tags, compared weakly (a proxy may have weakened ours). */
export function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return { status, body, headers };
}

/** `{items, next_cursor}` assembled from items that are JSON text already (stored runs, events): none is re-parsed. */
export function jsonPage(items: readonly string[], nextCursor: string | null): Reply {
  const next = nextCursor === null ? 'null' : JSON.stringify(nextCursor);
  return { status: 200, headers: JSON_HEADERS, body: `{"items":[${items.join(',')}],"next_cursor":${next}}` };
}

const BASE_HEADERS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export function sendReply(res: ServerResponse, reply: Reply, headOnly = false): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const headers: Record<string, string> = { ...BASE_HEADERS, ...reply.headers };
  let payload: Buffer | string | undefined;
  if (reply.body === undefined || reply.body === null) {
    payload = undefined;
  } else if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body)) {
    payload = reply.body;
  } else {
    payload = JSON.stringify(reply.body);
    headers['content-type'] ??= JSON_TYPE;
    headers['cache-control'] ??= 'no-store';
  }
  if (payload !== undefined) headers['content-length'] = String(Buffer.byteLength(payload));
  res.writeHead(reply.status, headers);
  res.end(headOnly ? undefined : payload);
}
