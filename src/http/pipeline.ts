// The request pipeline shared by both servers (DESIGN §4): Host → (UI file) → site → route → token → loopback →
// Origin → type → body, then the route's query list and the handler; and the one answer for whatever failed on the way.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createRouter, type Method } from './router.ts';
import { errorBody, httpErrorOf, HttpError } from './http-error.ts';
import { sendReply, TAKEN_OVER, type HandlerResult } from './respond.ts';
import { readBody, parseJson, parseJsonObject, MiB } from './body.ts';
import {
  checkBearer, checkFetchSite, checkHost, checkJsonContentType, checkLoopbackOnly, checkOrigin, mediaTypeOf,
  requestUrl, type RunnerCredential,
} from './guards.ts';
import type { StaticFiles } from './static-files.ts';
import type { Logger } from '../log.ts';
import { errorMessage, isDatabaseBusy, isDiskError } from '../errors.ts';
import type { RequestMetrics } from './metrics.ts';

export interface Ctx<D> {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  /** The parsed JSON of a json route (a signed route's JSON object, unset for its form); `raw`, the bytes. */
  body: unknown;
  raw: Buffer | undefined;
  peer: string;
  requestId: string;
  /** Set when a runner token (not the server's own) authenticated the request: its source and what it may do. */
  runner: RunnerCredential | undefined;
  deps: D;
}

export type Handler<D> = (ctx: Ctx<D>) => HandlerResult | Promise<HandlerResult>;

interface RouteBase<D> {
  method: Method;
  pattern: string;
  handler: Handler<D>;
  /** Bearer token required when the server has one (default: true for /v1/*). */
  auth?: boolean;
  loopbackOnly?: boolean;
  /** Runner tokens (PipelineOptions.runnerTokens) are accepted here too; the handler checks ctx.runner. */
  runner?: boolean;
  limit?: number;
  /** The query parameters it takes: another, or one given twice, is 400 invalid_param (unset: none is checked). */
  query?: readonly string[];
}

/**
 * `body`: 'json' enforces content type and parses; 'raw' hands over bytes; default none (body ignored). 'signed' (a
 * webhook) hands them to `verify`, its check of the bytes as they came (its secret, its signature), before anything
 * reads them, then parses a JSON object, or leaves a form in `raw`.
 */
export type Route<D> = RouteBase<D> & (
  | { body?: 'json' | 'raw' | 'optional-json'; verify?: never }
  | { body: 'signed'; verify: (ctx: Ctx<D>) => void }
);

interface PipelineOptions<D> {
  routes: ReadonlyArray<Route<D>>;
  deps: D;
  boundToLoopback: boolean;
  token?: string | undefined;
  runnerTokens?: readonly RunnerCredential[];
  /** The server's own origins, filled in once it listens (the set is read at each request). */
  ownOrigins?: ReadonlySet<string>;
  staticFiles?: StaticFiles;
  log: Logger;
  /** Refuse a body still arriving after this many ms (the slow-body guard). */
  bodyTimeoutMs?: number;
  /** A mutating request that matched a route but was refused before its handler ran (the Control Plane audits it, the
   * trigger counts it as a refused delivery). */
  onRefused?: (info: Refusal<D>) => void;
  requests?: RequestMetrics;
  /** One `request` log line per answered request (SVC_ACCESS_LOG=1): never a path, query, header or body. */
  accessLog?: boolean;
  /** A request met a busy database (db/open.ts busyMet: the next ones do not wait for the lock). */
  onBusy?: () => void;
}

export type Refusal<D> = Pick<Ctx<D>, 'req' | 'params' | 'peer' | 'requestId'> & { route: Route<D>; error: HttpError };

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** The route template a request matched (never the raw path) and, until its handler runs, its route and params. */
interface Seen<D> {
  pattern: string;
  route?: Route<D> | undefined;
  params?: Record<string, string>;
}

/** A request refused before any route matched it (Host, 404, 405); a UI file. */
const UNMATCHED_ROUTE = 'unmatched';
const STATIC_ROUTE = 'static';

/** Whether the route reads a body for this request: always for json, raw and signed, for optional-json when one is
 * sent. */
function wantsBody<D>(route: Route<D>, req: IncomingMessage): boolean {
  if (route.body === 'optional-json') return framesBody(req);
  return route.body !== undefined;
}

/** A signed route's form body: the form media type over `name=…` (a JSON text starts otherwise). */
function isForm(req: IncomingMessage, raw: Buffer): boolean {
  return mediaTypeOf(req) === 'application/x-www-form-urlencoded' && !/^\s*[[{"]/.test(raw.toString('latin1', 0, 16));
}

/** Whether the request's framing headers say a body follows (`complete` stays false while a bodyless request is
 * handled synchronously, so these decide). */
function framesBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** Strict query policy: an unknown parameter is a typo the caller wants to hear about, not a silent no-op. */
function checkQueryKeys(query: URLSearchParams, allowed: readonly string[]): void {
  for (const key of query.keys()) {
    if (!allowed.includes(key)) throw new HttpError('invalid_param', `Unknown query parameter "${key}"`);
  }
  for (const key of allowed) {
    if (query.getAll(key).length > 1) {
      throw new HttpError('invalid_param', `Query parameter "${key}" is given more than once`);
    }
  }
}

export function createPipeline<D>(opts: PipelineOptions<D>): RequestListener {
  const matchRoute = createRouter(opts.routes);
  const noOrigins = new Set<string>();

  /**
   * Runs the checks and the handler, synchronously unless a body is read or the handler returns a promise: a bodyless
   * route that answers at once is written from the parser's own callback (docs/bench.md).
   */
  function handle(req: IncomingMessage, res: ServerResponse, requestId: string, seen: Seen<D>): void | Promise<void> {
    const method = req.method ?? 'GET';
    // Node's own answer is a bare 400; both servers turn it off (requireHostHeader: false) for the envelope.
    if (req.headers.host === undefined && req.httpVersion === '1.1') {
      throw new HttpError('bad_request', 'HTTP/1.1 requests need a Host header');
    }
    const loopback = opts.boundToLoopback;
    checkHost(req, loopback);
    const url = requestUrl(req.url ?? '/');
    const pathname = url.pathname;
    if (opts.staticFiles && (method === 'GET' || method === 'HEAD') && !pathname.startsWith('/v1/')) {
      const file = opts.staticFiles(pathname, req.headers['if-none-match']);
      if (file) {
        seen.pattern = STATIC_ROUTE;
        sendReply(res, file, method === 'HEAD');
        return;
      }
    }
    // Before the route match, so a cross-site request is not audited (a page could write the audit log at will).
    if (req.headers['sec-fetch-site'] !== undefined || req.headers['sec-fetch-mode'] !== undefined) checkFetchSite(req);
    const match = matchRoute(method, pathname);
    const { route } = match;
    seen.pattern = route.pattern;
    seen.route = route;
    seen.params = match.params;
    const runner = (route.auth ?? pathname.startsWith('/v1/'))
      ? checkBearer(req, opts.token, route.runner ? opts.runnerTokens : undefined)
      : undefined;
    if (route.loopbackOnly) checkLoopbackOnly(req, loopback);
    if (req.headers.origin !== undefined) checkOrigin(req, opts.ownOrigins ?? noOrigins);
    const ctx: Ctx<D> = {
      req, res, params: match.params, query: url.searchParams, body: undefined, raw: undefined,
      peer: req.socket.remoteAddress ?? '', requestId, runner, deps: opts.deps,
    };
    if (!wantsBody(route, req)) {
      if (route.body === 'optional-json') ctx.body = {};
      return answer(route, ctx, seen);
    }
    if (route.body === 'json' || route.body === 'optional-json') checkJsonContentType(req);
    return readBody(req, { limit: route.limit ?? MiB, timeoutMs: opts.bodyTimeoutMs }).then((raw) => {
      ctx.raw = raw;
      if (route.body === 'signed') {
        route.verify(ctx);
        if (!isForm(req, raw)) ctx.body = parseJsonObject(raw);
      } else if (route.body !== 'raw') {
        ctx.body = route.body === 'optional-json' && raw.length === 0 ? {} : parseJson(raw);
      }
      return answer(route, ctx, seen);
    });
  }

  function answer(route: Route<D>, ctx: Ctx<D>, seen: Seen<D>): void | Promise<void> {
    // Admitted: from here on an error is the handler's own (the Control Plane's audited() records those).
    seen.route = undefined;
    if (route.query) checkQueryKeys(ctx.query, route.query);
    const result = route.handler(ctx);
    // Any thenable, not only a native Promise, is awaited, as `await` would.
    if (typeof (result as { then?: unknown }).then === 'function') {
      return Promise.resolve(result).then((settled) => send(ctx, settled));
    }
    send(ctx, result as HandlerResult);
  }

  function send(ctx: Ctx<D>, result: HandlerResult): void {
    if (result !== TAKEN_OVER) sendReply(ctx.res, result, ctx.req.method === 'HEAD');
  }

  const accessLog = opts.accessLog ? opts.log : null;
  const observed = opts.requests || accessLog ? observeAnswer(opts.requests, accessLog) : null;

  return (req, res) => {
    const requestId = randomUUID();
    const seen: Seen<D> = { pattern: UNMATCHED_ROUTE };
    if (observed) observed(req, res, requestId, seen);
    let pending: void | Promise<void>;
    try {
      pending = handle(req, res, requestId, seen);
    } catch (err) {
      answerFailure(req, res, requestId, seen, err, opts);
      return;
    }
    pending?.catch((err: unknown) => answerFailure(req, res, requestId, seen, err, opts));
  };
}

/** Counts a request once its answer has ended (or its client went away: status 0); its access log line. */
function observeAnswer(
  requests: RequestMetrics | undefined, log: Logger | null,
): (req: IncomingMessage, res: ServerResponse, requestId: string, seen: { pattern: string }) => void {
  return (req, res, requestId, seen) => {
    const started = performance.now();
    const socket = req.socket;
    // Only the access log needs them: bytesWritten copies the socket's write buffer to count it.
    const before = log ? socket.bytesWritten : 0;
    const peer = log ? socket.remoteAddress ?? '' : '';
    // `on`, not `once`: a response closes once, and once's wrapper was one more allocation per request.
    res.on('close', () => {
      const seconds = (performance.now() - started) / 1000;
      const status = res.headersSent ? res.statusCode : 0;
      requests?.observe(seen.pattern, req.method, status, seconds);
      if (!log) return;
      log.info('request', {
        method: req.method, route: seen.pattern, status, duration_ms: Math.round(seconds * 1e6) / 1e3,
        bytes: socket.bytesWritten - before, request_id: requestId, peer,
      });
    });
  };
}

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

// A refusal (an HttpError, from a guard or a handler, or a typed svc error: http-error.ts httpErrorOf) gets the error
// envelope and, for a mutating request refused before its handler ran, the onRefused hook; a database another process
// keeps locked is a 503 with Retry-After; anything else is a 500 that names the request id and logs the cause.
function answerFailure<D>(
  req: IncomingMessage, res: ServerResponse, requestId: string, seen: Seen<D>, thrown: unknown,
  opts: PipelineOptions<D>,
): void {
  const err = refusalOf(thrown) ?? new HttpError('internal_error', `Internal error (request ${requestId})`);
  // refusalOf is the one mapping; the branches below only say what is logged, and which refusals the hook hears of.
  if (httpErrorOf(thrown)) {
    if (opts.onRefused && seen.route && !SAFE_METHODS.has(req.method ?? 'GET')) {
      const refusal = { route: seen.route, params: seen.params ?? {}, req, peer: req.socket.remoteAddress ?? '' };
      try {
        opts.onRefused({ ...refusal, requestId, error: err });
      } catch (hookErr) {
        // The refusal is answered either way; a failing hook is logged, never turned into a 500.
        opts.log.error('refusal hook failed', { request_id: requestId, error: errorMessage(hookErr) });
      }
    }
  } else if (isDatabaseBusy(thrown)) {
    opts.log.warn('database busy: another process holds its write lock', { request_id: requestId });
    opts.onBusy?.();
  } else if (isDiskError(thrown)) {
    opts.log.error('disk error (full or failing): the request was refused',
      { request_id: requestId, error: errorMessage(thrown) });
  } else {
    opts.log.error('unhandled error', { request_id: requestId, error: errorMessage(thrown) });
  }
  closeAfterRefusal(req, res);
  try {
    sendReply(res, { status: err.status, headers: err.headers, body: errorBody(err.code, err.message) });
  } catch (sendErr) {
    // A header the error carried that Node will not write throws before anything is sent: answer without it.
    opts.log.error('error reply failed', { request_id: requestId, error: String(sendErr) });
    sendReply(res, { status: err.status, body: errorBody(err.code, err.message) });
  }
}

/** What a request that met a busy database is answered and audited as. */
function databaseBusy(): HttpError {
  return new HttpError('unavailable', 'The database is busy (another process holds its write lock); try again',
    { 'retry-after': '1' });
}

/** A request a disk error refused (full or failing): one the client can act on, not an internal error (its transaction
 * was taken back). */
function diskError(): HttpError {
  const message = 'The server\'s disk is full or failing (a disk error): the request was not done; try again later';
  return new HttpError('unavailable', message, { 'retry-after': '60' });
}

/** What a thrown error is answered as if no crash (svc's typed error, a busy database, a disk error), else null. */
export function refusalOf(err: unknown): HttpError | null {
  return httpErrorOf(err) ?? (isDatabaseBusy(err) ? databaseBusy() : isDiskError(err) ? diskError() : null);
}

/** Long enough for a client to read a refusal before the reset that closing on unread data sends (RFC 9112 §9.6). */
const REFUSED_LINGER_MS = 1_000;

/**
 * Closes the connection of a request answered before its body was read to the end, reading no more of it (draining
 * an endless chunked body would read ~12 GiB in 5 s). Call before the reply is written.
 */
function closeAfterRefusal(req: IncomingMessage, res: ServerResponse): void {
  if (!framesBody(req) || req.complete || res.headersSent) return;
  // A paused request stops the parser reading the socket once its small buffer fills; Node does not drain a body
  // for a response that closes the connection.
  req.pause();
  res.shouldKeepAlive = false;
  res.once('finish', () => {
    const socket = res.socket ?? req.socket;
    const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}
