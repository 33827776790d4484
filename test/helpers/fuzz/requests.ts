// Generates requests for one route of a route table: path parameters, query strings, methods, headers and bodies
// (real bodies mutated by values.ts), plus raw-socket requests that break HTTP framing itself.
import type { Rng } from './rng.ts';
import type { FuzzRequest } from './send.ts';
import { fuzzBody, type Json } from './values.ts';

export interface RouteLike {
  method: string;
  pattern: string;
  body?: 'json' | 'raw' | 'optional-json' | 'signed' | undefined;
}

/** What a suite knows about a route so that generated requests get past its outer checks to the handler. */
export interface RouteTemplate {
  /** Real bodies (webhook fixtures, a realistic ingest batch …); JSON values, or text for form bodies. */
  bodies?: ReadonlyArray<Json | { form: string }>;
  /** Valid values per path parameter (`:source`, `:run`, `*path`). */
  params?: Record<string, readonly string[]>;
  /** Query parameter names the route knows. */
  query?: readonly string[];
  /** Whole valid query strings (`?a=1&b=2`), used half the time so requests reach the handler's work. */
  queries?: readonly string[];
  contentType?: string;
  /** Headers that let the body reach the handler (signatures, bearer), computed from the final bytes. */
  sign?: (body: Buffer, rng: Rng) => Record<string, string>;
  /** Headers every request to the route carries most of the time (a bearer token), body or not. */
  auth?: Record<string, string>;
  stream?: boolean;
}

const HOSTILE_SEGMENTS = ['..', '%2e%2e', '%00', 'a'.repeat(200), '%ZZ', '%', 'toString', '__proto__', 'constructor',
  '%F0%9F%98%80', '%C3%28', '%FF', '.hidden', 'a%20b', '-rf', 'hasOwnProperty', '%2F', 'r%0d%0ax'];
const HOSTILE_TAILS = ['../../etc/passwd', 'a/%2e%2e/b', '%5c', 'a//b', 'x'.repeat(2000), '%00', 'a/./b', '.', '%2e'];
const QUERY_VALUES = ['', '0', '-1', '1', '501', '1e3', 'NaN', '9999999999999999999', 'x'.repeat(3000), '%', '%zz', '%FF',
  '2026-01-01', '2026-13-45T99:99:99Z', 'toString', '__proto__', 'true', '[]', '{}', '%00', 'eyJhIjoxfQ', '@@@'];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'FOO', 'SEARCH'];
const CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded',
  'application/json; charset=utf-16', 'APPLICATION/JSON', 'multipart/form-data; boundary=x', 'application/jsonx', ''];

function fillPath(rng: Rng, pattern: string, tpl: RouteTemplate): string {
  return pattern.replace(/[:*]([A-Za-z]+)/g, (whole, name: string) => {
    const valid = tpl.params?.[name];
    if (valid && valid.length > 0 && rng.chance(0.75)) return rng.pick(valid);
    return whole.startsWith('*') && rng.chance(0.6) ? rng.pick(HOSTILE_TAILS) : rng.pick(HOSTILE_SEGMENTS);
  });
}

function queryString(rng: Rng, tpl: RouteTemplate): string {
  if (tpl.queries && tpl.queries.length > 0 && rng.chance(0.5)) return rng.pick(tpl.queries);
  if (rng.chance(0.5)) return '';
  const keys = [...(tpl.query ?? []), 'limit', 'cursor', '__proto__', 'toString', 'constructor', 'x'];
  const parts: string[] = [];
  for (let i = rng.int(4); i >= 0; i--) {
    const value = rng.pick(QUERY_VALUES);
    const encoded = value.startsWith('%') || rng.chance(0.2) ? value : encodeURIComponent(value);
    parts.push(rng.chance(0.1) ? rng.pick(['&', '=', 'a', '&&=']) : `${rng.pick(keys)}=${encoded}`);
  }
  return `?${parts.join('&')}`;
}

function oddHeaders(rng: Rng): Record<string, string> {
  const h: Record<string, string> = {};
  if (rng.chance(0.05)) h.origin = rng.pick(['http://evil.test', 'null', 'http://127.0.0.1:1', 'x']);
  if (rng.chance(0.03)) h.host = rng.pick(['evil.test', 'localhost', '127.0.0.1:1', '[::1]', 'a'.repeat(300), '']);
  if (rng.chance(0.05)) h.authorization = rng.pick(['Bearer', 'Bearer x', 'Basic Og==', 'HMAC', 'a'.repeat(5000)]);
  if (rng.chance(0.03)) h['if-match'] = rng.pick(['"x"', '*', '99999999999999999999', 'W/"1"']);
  if (rng.chance(0.03)) h['last-event-id'] = rng.pick(['-1', '1e3', 'x', '99999999999999999999']);
  if (rng.chance(0.03)) h['x-forwarded-for'] = '1.2.3.4';
  if (rng.chance(0.02)) h['x-big'] = 'b'.repeat(rng.pick([100, 6000]));
  return h;
}

function formBody(rng: Rng, form: string): Buffer {
  const pairs = form.split('&').map((p) => p.split('='));
  const i = rng.int(pairs.length);
  const value = rng.pick(['%FF%FE', '%C3', '-rf%20%2F', '%00%0a', 'x'.repeat(5000), '%E2%80%AE', '', '%', 'a%2', '--help', '%F0%9F%98%80']);
  if (rng.chance(0.7)) pairs[i] = [pairs[i]![0]!, value];
  else pairs.push([rng.pick(['__proto__', 'toString', 'text', 'ssl_check']), value]);
  return Buffer.from(pairs.map((p) => p.join('=')).join('&'));
}

function bodyFor(rng: Rng, tpl: RouteTemplate): Buffer {
  const bodies = tpl.bodies ?? [{}];
  const base = rng.pick(bodies);
  const form = base !== null && typeof base === 'object' && !Array.isArray(base) ? (base as { form?: unknown }).form : undefined;
  if (typeof form === 'string') return formBody(rng, form);
  return fuzzBody(rng, base as Json);
}

/** One request for a route: mostly its own method and a mutated real body, sometimes everything else. */
export function routeRequest(rng: Rng, route: RouteLike, tpl: RouteTemplate = {}): FuzzRequest {
  const method = rng.chance(0.85) ? route.method : rng.pick(METHODS);
  const path = fillPath(rng, route.pattern, tpl) + queryString(rng, tpl);
  const headers: Record<string, string> = { ...(tpl.auth && rng.chance(0.9) ? tpl.auth : {}), ...oddHeaders(rng) };
  let body: Buffer | undefined;
  if (route.body !== undefined || rng.chance(0.1)) {
    body = rng.chance(0.03) ? Buffer.alloc(0) : bodyFor(rng, tpl);
    const type = rng.chance(0.85) ? (tpl.contentType ?? 'application/json') : rng.pick(CONTENT_TYPES);
    if (type !== '') headers['content-type'] = type;
    if (tpl.sign && rng.chance(0.9)) Object.assign(headers, tpl.sign(body, rng));
    if (rng.chance(0.05)) headers['transfer-encoding'] = 'chunked';
  }
  const note = `${route.method} ${route.pattern}`;
  return { note, route: note, method, path, headers, ...(body ? { body } : {}), stream: tpl.stream === true, mutating: method !== 'GET' && method !== 'HEAD' };
}

/** Requests that break HTTP itself, on a fresh socket each: parser errors, framing conflicts, odd bytes. */
export function rawRequest(rng: Rng, route: RouteLike, host: string): FuzzRequest {
  const path = route.pattern.replace(/[:*][A-Za-z]+/g, 'x');
  const json = '{"a":1}';
  const cases: Array<[string, string | Buffer]> = [
    ['garbage request line', 'GARBAGE\r\n\r\n'],
    ['unknown method', `FOO ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['lowercase method', `get ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['HTTP/9.9', `GET ${path} HTTP/9.9\r\nHost: ${host}\r\n\r\n`],
    ['no Host', `GET ${path} HTTP/1.1\r\n\r\n`],
    ['HTTP/1.0 no Host', `GET ${path} HTTP/1.0\r\n\r\n`],
    ['space in path', `GET ${path}/a b HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['NUL in header', `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-A: a\u0000b\r\n\r\n`],
    ['bad header name', `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nbad header: 1\r\n\r\n`],
    ['obs-fold', `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-A: a\r\n b\r\n\r\n`],
    ['bare LF', `GET ${path} HTTP/1.1\nHost: ${host}\n\n`],
    ['CL and TE', `${route.method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n${json}\r\n0\r\n\r\n`],
    ['two Content-Lengths', `${route.method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n${json}`],
    ['bad chunk size', `${route.method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n${json}\r\n0\r\n\r\n`],
    ['negative Content-Length', `${route.method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Length: -1\r\n\r\n`],
    ['70 KB header', `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`],
    ['20 KB URL', `GET ${path}?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['300 headers', `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${Array.from({ length: 300 }, (_, i) => `X-${i}: ${i}\r\n`).join('')}\r\n`],
    ['CONNECT', `CONNECT ${host} HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['absolute-form target', `GET http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
    ['asterisk target', `OPTIONS * HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
  ];
  const [name, bytes] = rng.pick(cases);
  const latin1 = Buffer.from(bytes as string, 'latin1');
  const high = rng.chance(0.15) ? Buffer.from(`GET ${path}/\xff\xfe HTTP/1.1\r\nHost: ${host}\r\nX-A: \xe9\xff\r\n\r\n`, 'latin1') : null;
  const raw = high ?? latin1;
  // A chunk the parser refuses after the request was dispatched can only be answered by closing the socket.
  const mayClose = !high && name === 'bad chunk size';
  return { note: `${route.method} ${route.pattern} (raw: ${high ? 'high bytes' : name})`, route: `${route.method} ${route.pattern}`, method: 'RAW', path, headers: {}, raw, mutating: true, mayClose };
}
