// The request checks of DESIGN §4, each a small pure function so the order lives in one pipeline.
import type { IncomingMessage } from 'node:http';
import { timingSafeEqual, createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { HttpError } from './http-error.ts';

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (a === '::1' || a === 'localhost') return true;
  return isIP(a) === 4 && a.startsWith('127.');
}

/** Hostname part of a Host header value, lower-cased, brackets kept for IPv6. */
export function hostnameOf(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end === -1 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** DNS-rebinding guard: a loopback-bound server answers only to loopback Host names. */
export function checkHost(req: IncomingMessage, boundToLoopback: boolean): void {
  if (!boundToLoopback) return;
  const host = req.headers.host;
  if (!host || !LOOPBACK_HOSTS.has(hostnameOf(host))) {
    throw new HttpError('forbidden_host', 'Host header must name this machine (localhost, 127.0.0.1 or [::1])');
  }
}

/** Constant-time string compare; hashing first makes lengths equal so length leaks nothing either. */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db) && a.length === b.length;
}

export function checkBearer(req: IncomingMessage, token: string | undefined): void {
  if (!token) return;
  const header = req.headers.authorization ?? '';
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match || !safeEqual(match[1]!, token)) {
    throw new HttpError('unauthorized', 'Missing or wrong bearer token', { 'www-authenticate': 'Bearer' });
  }
}

export function checkLoopbackOnly(req: IncomingMessage, boundToLoopback: boolean): void {
  if (!boundToLoopback || !isLoopbackAddress(req.socket.remoteAddress)) {
    throw new HttpError('loopback_only', 'This action is only available on a loopback-bound server from this machine');
  }
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** CSRF guard: a browser's mutating request must come from the server's own origin. */
export function checkOrigin(req: IncomingMessage, ownOrigins: ReadonlySet<string>): void {
  if (!MUTATING.has(req.method ?? '')) return;
  const origin = req.headers.origin;
  if (origin === undefined) return;
  const host = req.headers.host;
  const sameAsHost = host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
  if (!sameAsHost && !ownOrigins.has(origin)) {
    throw new HttpError('forbidden_origin', `Origin "${origin}" is not allowed`);
  }
}

export function checkJsonContentType(req: IncomingMessage): void {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new HttpError('unsupported_media_type', 'Content-Type must be application/json');
  }
}

export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return h === 'localhost' || isLoopbackAddress(h);
}

/** `.`/`..` as a path segment, literally or percent-encoded (WHATWG URL treats `%2e` as a dot too). */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * Parses the request target without the WHATWG normalisation that would silently resolve `..` (so
 * `/v1/runs/a/b/artifact/../../x` must not quietly become another route) or turn `\` into `/`, and keeps a target
 * starting with `//` as a path rather than a host. Dot segments and raw backslashes are 400 bad_request (DESIGN §4).
 */
export function requestUrl(target: string): URL {
  const path = target.split('?', 1)[0]!;
  // The segment scan only runs when a dot or escape is present: /health stays on the fast path.
  const suspect = path.includes('.') || path.includes('%');
  if (path.includes('\\') || (suspect && path.split('/').some((segment) => DOT_SEGMENT.test(segment)))) {
    throw new HttpError('bad_request', 'Request path must not contain ".", ".." or backslash segments');
  }
  try {
    return target.startsWith('/') ? new URL(`http://localhost${target}`) : new URL(target, 'http://localhost');
  } catch {
    throw new HttpError('bad_request', 'Request target is not a valid path');
  }
}
