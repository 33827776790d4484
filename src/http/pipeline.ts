// The request pipeline shared by both servers: Host → route → token → loopback → Origin → type → body (DESIGN §4).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRouter, type Method } from './router.ts';
import { HttpError, errorBody, isHttpError } from './http-error.ts';
import { sendReply, TAKEN_OVER, type HandlerResult } from './respond.ts';
import { readBody, parseJson, MiB } from './body.ts';
import {
  checkBearer, checkBearerOrRunner, checkHost, checkJsonContentType, checkLoopbackOnly, checkOrigin, parseTarget,
  type RunnerCredential,
} from './guards.ts';
import type { StaticFiles } from './static-files.ts';
import { RequestCtx, RequestId } from './request-ctx.ts';
import { closeAfterRefusal } from './close-after-refusal.ts';
import type { Logger } from '../log.ts';

export interface Ctx<D> {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  url: URL;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Parsed JSON body for `body: 'json'` routes. */
  body: unknown;
  /** Raw bytes for `body: 'raw'` and `body: 'json'` routes. */
  raw: Buffer | undefined;
  peer: string;
  requestId: string;
  /** Set when a runner token (not the server's own) authenticated the request: the source it may act for. */
  runnerSource: string | undefined;
  deps: D;
}

export type Handler<D> = (ctx: Ctx<D>) => HandlerResult | Promise<HandlerResult>;

export interface Route<D> {
  method: Method;
  pattern: string;
  handler: Handler<D>;
  /** Bearer token required when the server has one (default: true for /v1/*). */
  auth?: boolean;
  loopbackOnly?: boolean;
  /** Runner tokens (PipelineOptions.runnerTokens) are accepted here too; the handler checks ctx.runnerSource. */
  runner?: boolean;
  /** 'json' enforces content type and parses; 'raw' hands over bytes; default none (body ignored). */
  body?: 'json' | 'raw' | 'optional-json';
  limit?: number;
}

export interface PipelineOptions<D> {
  routes: ReadonlyArray<Route<D>>;
  deps: D;
  boundToLoopback: () => boolean;
  token?: string | undefined;
  /** Tokens that open only `runner` routes, each for one source. */
  runnerTokens?: readonly RunnerCredential[];
  ownOrigins?: () => ReadonlySet<string>;
  staticFiles?: StaticFiles;
  log: Logger;
  /** Refuse a body still arriving after this many ms (slow-body guard); readBody's default otherwise. */
  bodyTimeoutMs?: number;
  /**
   * Told about a mutating request that matched a route but was refused before its handler ran (401, 403, 415, 413,
   * 400 invalid_json): the Control Plane audits those. Errors from the handler itself never reach it.
   */
  onRefused?: (info: Refusal<D>) => void;
}

export interface Refusal<D> {
  route: Route<D>;
  params: Record<string, string>;
  method: string;
  req: IncomingMessage;
  peer: string;
  requestId: string;
  error: HttpError;
}

/** Set while a request is between its route match and its handler; only allocated when onRefused is set. */
interface Admission<D> {
  route?: Route<D> | undefined;
  params?: Record<string, string>;
}

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export function createPipeline<D>(opts: PipelineOptions<D>): RequestListener {
  const router = createRouter(opts.routes.map((r) => ({ method: r.method, pattern: r.pattern, handler: r })));
  const noOrigins = new Set<string>();
  const bodyTimeout = opts.bodyTimeoutMs === undefined ? {} : { timeoutMs: opts.bodyTimeoutMs };

  /**
   * Runs the checks and the handler. Synchronous as far as it can be: a route without a body whose handler answers
   * at once (/health, a runs page) is written from the parser's own callback, with no promise or microtask in
   * between; only a body to read or a handler that returns a promise makes it asynchronous.
   */
  function handle(
    req: IncomingMessage, res: ServerResponse, requestId: RequestId, admission?: Admission<D>,
  ): void | Promise<void> {
    const method = req.method ?? 'GET';
    // Node's own answer to a Host-less HTTP/1.1 request is a bare 400; both servers turn it off (requireHostHeader:
    // false) so the refusal is the envelope here instead (RFC 9112 §3.2).
    if (req.headers.host === undefined && req.httpVersion === '1.1') {
      throw new HttpError('bad_request', 'HTTP/1.1 requests need a Host header');
    }
    const loopback = opts.boundToLoopback();
    checkHost(req, loopback);
    const target = parseTarget(req.url ?? '/');
    const pathname = target.pathname;
    if (opts.staticFiles && (method === 'GET' || method === 'HEAD') && !pathname.startsWith('/v1/')) {
      const file = opts.staticFiles.lookup(pathname, req.headers['if-none-match']);
      if (file) {
        sendReply(res, file, method === 'HEAD');
        return;
      }
    }
    const match = router.match(method, pathname);
    const route = match.handler;
    if (admission) {
      admission.route = route;
      admission.params = match.params;
    }
    let runnerSource: string | undefined;
    if (route.auth ?? pathname.startsWith('/v1/')) {
      if (route.runner && opts.runnerTokens?.length) {
        runnerSource = checkBearerOrRunner(req, opts.token, opts.runnerTokens);
      } else {
        checkBearer(req, opts.token);
      }
    }
    if (route.loopbackOnly) checkLoopbackOnly(req, loopback);
    // checkOrigin only ever looks at a request that carries an Origin header.
    if (req.headers.origin !== undefined) checkOrigin(req, opts.ownOrigins?.() ?? noOrigins);
    const ctx = new RequestCtx<D>(req, res, method, target, match.params, requestId, opts.deps);
    ctx.runnerSource = runnerSource;
    if (route.body === 'json' || route.body === 'optional-json') {
      const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
      if (route.body === 'json' || hasBody) {
        checkJsonContentType(req);
        return readBody(req, { limit: route.limit ?? MiB, ...bodyTimeout }).then((raw) => {
          ctx.raw = raw;
          ctx.body = route.body === 'optional-json' && raw.length === 0 ? {} : parseJson(raw);
          return answer(route, ctx, admission);
        });
      }
      ctx.body = {};
    } else if (route.body === 'raw') {
      return readBody(req, { limit: route.limit ?? MiB, ...bodyTimeout }).then((raw) => {
        ctx.raw = raw;
        return answer(route, ctx, admission);
      });
    }
    return answer(route, ctx, admission);
  }

  /** The admitted request's handler and its reply. */
  function answer(route: Route<D>, ctx: RequestCtx<D>, admission: Admission<D> | undefined): void | Promise<void> {
    // Admitted: from here on an error is the handler's own (the Control Plane's audited() records those).
    if (admission) admission.route = undefined;
    const result = route.handler(ctx);
    // Any thenable, not only a native Promise, is awaited (as `await` did before this path became synchronous).
    if (typeof (result as { then?: unknown }).then === 'function') {
      return Promise.resolve(result).then((settled) => send(ctx, settled));
    }
    send(ctx, result as HandlerResult);
  }

  function send(ctx: RequestCtx<D>, result: HandlerResult): void {
    if (result !== TAKEN_OVER) sendReply(ctx.res, result, ctx.method === 'HEAD');
  }

  function reportRefusal(
    route: Route<D>, params: Record<string, string>, req: IncomingMessage, requestId: RequestId, error: HttpError,
  ): void {
    try {
      const method = req.method ?? 'GET';
      const peer = req.socket.remoteAddress ?? '';
      opts.onRefused!({ route, params, method, req, peer, requestId: requestId.get(), error });
    } catch (err) {
      // The refusal is answered either way; a failing hook is logged, never turned into a 500.
      const message = err instanceof Error ? err.message : String(err);
      opts.log.error('refusal hook failed', { request_id: requestId.get(), error: message });
    }
  }

  function fail(
    req: IncomingMessage, res: ServerResponse, requestId: RequestId, admission: Admission<D> | undefined, err: unknown,
  ): void {
    if (isHttpError(err)) {
      if (admission?.route && !SAFE_METHODS.has(req.method ?? 'GET')) {
        reportRefusal(admission.route, admission.params ?? {}, req, requestId, err);
      }
      closeAfterRefusal(req, res);
      try {
        sendReply(res, { status: err.status, headers: err.headers, body: errorBody(err.code, err.message) });
      } catch (sendErr) {
        // A header the error carried that Node will not write must not leave the request unanswered.
        if (res.headersSent) return void res.destroy();
        opts.log.error('error reply failed', { request_id: requestId.get(), error: String(sendErr) });
        sendReply(res, { status: err.status, body: errorBody(err.code, err.message) });
      }
      return;
    }
    const error = err instanceof Error ? err.message : String(err);
    opts.log.error('unhandled error', { request_id: requestId.get(), error });
    closeAfterRefusal(req, res);
    sendReply(res, { status: 500, body: errorBody('internal_error', `Internal error (request ${requestId.get()})`) });
  }

  return (req, res) => {
    const requestId = new RequestId();
    const admission: Admission<D> | undefined = opts.onRefused ? {} : undefined;
    let pending: void | Promise<void>;
    try {
      pending = handle(req, res, requestId, admission);
    } catch (err) {
      fail(req, res, requestId, admission, err);
      return;
    }
    pending?.catch((err: unknown) => fail(req, res, requestId, admission, err));
  };
}

export { HttpError };
