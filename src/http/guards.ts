// The request checks of DESIGN §4, each a small pure function so the order lives in one pipeline.
import type { IncomingMessage } from 'node:http';
import { hash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { HttpError } from './http-error.ts';

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (a === '::1' || a === 'localhost') return true;
  return isIP(a) === 4 && a.startsWith('127.');
}

/** Hostname part of a Host header value HOST_VALUE accepts, lower-cased, brackets kept for IPv6. */
export function hostnameOf(hostHeader: string): string {
  return hostHeader.toLowerCase().replace(/:[0-9]{1,5}$/, '');
}

/** RFC 9110 §7.2 `Host = uri-host [ ":" port ]` strictly: no lists, nothing after `]`, no userinfo or escapes. */
const HOST_VALUE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?$/;

/** How many Host field lines the request carried (Node keeps only the first in `req.headers`). */
function hostLines(req: IncomingMessage): number {
  const raw = req.rawHeaders ?? [];
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') n++;
  return n;
}

export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Host is well formed and single (RFC 9112 §3.2), and a loopback name on a loopback-bound server (DNS rebinding). */
export function checkHost(req: IncomingMessage, boundToLoopback: boolean): void {
  const host = req.headers.host;
  if (host !== undefined && hostLines(req) > 1) {
    throw new HttpError('bad_request', 'Request carries more than one Host header');
  }
  if (host !== undefined && host !== '' && !HOST_VALUE.test(host)) {
    throw new HttpError('bad_request', 'Host header is not a host name or address with an optional port');
  }
  if (boundToLoopback && (!host || !LOOPBACK_HOSTS.has(hostnameOf(host)))) {
    throw new HttpError('forbidden_host', 'Host header must name this machine (localhost, 127.0.0.1 or [::1])');
  }
}

/** Constant-time string compare; hashing first makes lengths equal so length leaks nothing either. */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash('sha256', a, 'buffer'), hash('sha256', b, 'buffer')) && a.length === b.length;
}

/** A bearer token that opens only the routes marked `runner`, for one source (src/control/settings.ts). */
export interface RunnerCredential {
  source: string;
  token: string;
  /** Writes only runs already stored and bound to the key its batch carries, nothing source-wide: a pod's run
   * container's token (`bound-runs`). */
  boundRuns?: boolean;
  /** Sources whose runs it may also read one at a time, GET /v1/runs/<source>/<run> (`read=`): a trigger's. */
  reads?: readonly string[];
}

export function unauthorized(): HttpError {
  return new HttpError('unauthorized', 'Missing or wrong bearer token', { 'www-authenticate': 'Bearer' });
}

/**
 * The server's own token (answers undefined) or, on a route runners may call, a runner token (answers it).
 * Every runner token is compared, in constant time each, whatever matched before.
 */
export function checkBearer(
  req: IncomingMessage,
  token: string | undefined,
  runners: readonly RunnerCredential[] = [],
): RunnerCredential | undefined {
  if (!token) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  const presented = match?.[1];
  if (presented !== undefined && safeEqual(presented, token)) return undefined;
  let found: RunnerCredential | undefined;
  for (const runner of runners) {
    if (presented !== undefined && safeEqual(presented, runner.token)) found = runner;
  }
  if (found === undefined) throw unauthorized();
  return found;
}

/** Why a loopback-only route refuses the caller, or null: it is this machine, unproxied, on a loopback bind. */
function loopbackRefusal(req: IncomingMessage, boundToLoopback: boolean): HttpError | null {
  if (!boundToLoopback || !isLoopbackAddress(req.socket.remoteAddress)) {
    return new HttpError('loopback_only', 'This action is only available on a loopback-bound server from this machine');
  }
  const relayed = proxyHeaderOf(req);
  if (relayed === undefined) return null;
  return new HttpError('proxied_request', `This action is refused through a proxy (the request carries "${relayed}")`);
}

export function checkLoopbackOnly(req: IncomingMessage, boundToLoopback: boolean): void {
  const refusal = loopbackRefusal(req, boundToLoopback);
  if (refusal) throw refusal;
}

/** A caller loopback-only routes admit: it may also read what only this machine's operator may (paths, commands). */
export function isLocalCaller(req: IncomingMessage, boundToLoopback: boolean): boolean {
  return loopbackRefusal(req, boundToLoopback) === null;
}

/**
 * The first header that says a proxy relayed the request, else undefined: a reverse proxy on the same host connects
 * from 127.0.0.1, so without this every client of the proxy would pass the loopback peer check.
 */
export function proxyHeaderOf(req: IncomingMessage): string | undefined {
  for (const name of Object.keys(req.headers)) {
    if (name === 'forwarded' || name === 'via' || name === 'x-real-ip' || name.startsWith('x-forwarded-')) return name;
  }
  return undefined;
}

/**
 * Fetch Metadata: a page of another site or origin (`same-site`: another port of localhost) gets nothing, nor does a
 * `no-cors` request, GETs included, which carry no Origin. The UI, a typed address and curl or the CLI pass.
 */
export function checkFetchSite(req: IncomingMessage): void {
  const site = req.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') {
    const message = `Requests from another site or origin are refused (Sec-Fetch-Site: ${site})`;
    throw new HttpError('forbidden_origin', message);
  }
  if (req.headers['sec-fetch-mode'] === 'no-cors') {
    throw new HttpError('forbidden_origin', 'no-cors requests are refused (Sec-Fetch-Mode: no-cors)');
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

/** The request's media type: its Content-Type without parameters, in lower case ('' when none). */
export function mediaTypeOf(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

export function checkJsonContentType(req: IncomingMessage): void {
  if (mediaTypeOf(req) !== 'application/json') {
    throw new HttpError('unsupported_media_type', 'Content-Type must be application/json');
  }
}

export function isLoopbackHost(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return isLoopbackAddress(h);
}

/** `.`/`..` as a path segment, literally or percent-encoded (WHATWG URL treats `%2e` as a dot too). */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * Parses the request target without the WHATWG normalisation that would silently resolve `..` into another route or
 * turn `\` into `/`, keeping a target starting with `//` a path: dot segments and backslashes are 400 (DESIGN §4).
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
