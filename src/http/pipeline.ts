// The request pipeline shared by both servers (DESIGN §4): Host → (UI file) → site → route → token → loopback →
// Origin → type → body.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createRouter } from './router.ts';
import { HttpError } from './http-error.ts';
import { sendReply, TAKEN_OVER, type HandlerResult } from './respond.ts';
import { readBody, parseJson, MiB } from './body.ts';
import {
  checkBearer, checkBearerOrRunner, checkFetchSite, checkHost, checkJsonContentType, checkLoopbackOnly, checkOrigin,
  requestUrl,
} from './guards.ts';
import { answerFailure } from './pipeline-failure.ts';

export type { Admission, Ctx, Handler, PipelineOptions, Refusal, Route } from './pipeline-types.ts';
import type { Admission, Ctx, PipelineOptions, Route } from './pipeline-types.ts';

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** The bearer token where the route wants one; on a `runner` route a runner token too, whose source it returns. */
function checkCredentials<D>(
  route: Route<D>, req: IncomingMessage, pathname: string, opts: PipelineOptions<D>,
): string | undefined {
  if (!(route.auth ?? pathname.startsWith('/v1/'))) return undefined;
  if (route.runner && opts.runnerTokens?.length) return checkBearerOrRunner(req, opts.token, opts.runnerTokens);
  checkBearer(req, opts.token);
  return undefined;
}

/** Whether the route reads a body for this request: always for json and raw, for optional-json when one is sent. */
function wantsBody<D>(route: Route<D>, req: IncomingMessage): boolean {
  if (route.body === 'json' || route.body === 'raw') return true;
  if (route.body !== 'optional-json') return false;
  return Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
}

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
    req: IncomingMessage, res: ServerResponse, requestId: string, admission?: Admission<D>,
  ): void | Promise<void> {
    const method = req.method ?? 'GET';
    // Node's own answer to a Host-less HTTP/1.1 request is a bare 400; both servers turn it off (requireHostHeader:
    // false) so the refusal is the envelope here instead (RFC 9112 §3.2).
    if (req.headers.host === undefined && req.httpVersion === '1.1') {
      throw new HttpError('bad_request', 'HTTP/1.1 requests need a Host header');
    }
    const loopback = opts.boundToLoopback();
    checkHost(req, loopback);
    const url = requestUrl(req.url ?? '/');
    const pathname = url.pathname;
    if (opts.staticFiles && (method === 'GET' || method === 'HEAD') && !pathname.startsWith('/v1/')) {
      const file = opts.staticFiles.lookup(pathname, req.headers['if-none-match']);
      if (file) {
        sendReply(res, file, method === 'HEAD');
        return;
      }
    }
    // Before the route match: a refused cross-site request costs two header lookups and is not audited (a page could
    // otherwise write the audit log at will).
    if (req.headers['sec-fetch-site'] !== undefined || req.headers['sec-fetch-mode'] !== undefined) checkFetchSite(req);
    const match = router.match(method, pathname);
    const route = match.handler;
    if (admission) {
      admission.route = route;
      admission.params = match.params;
    }
    const runnerSource = checkCredentials(route, req, pathname, opts);
    if (route.loopbackOnly) checkLoopbackOnly(req, loopback);
    // checkOrigin only ever looks at a request that carries an Origin header.
    if (req.headers.origin !== undefined) checkOrigin(req, opts.ownOrigins?.() ?? noOrigins);
    const ctx: Ctx<D> = {
      req, res, method, url, params: match.params, query: url.searchParams, body: undefined, raw: undefined,
      peer: req.socket.remoteAddress ?? '', requestId, runnerSource, deps: opts.deps,
    };
    if (!wantsBody(route, req)) {
      if (route.body === 'optional-json') ctx.body = {};
      return answer(route, ctx, admission);
    }
    if (route.body !== 'raw') checkJsonContentType(req);
    return readBody(req, { limit: route.limit ?? MiB, ...bodyTimeout }).then((raw) => {
      ctx.raw = raw;
      if (route.body !== 'raw') ctx.body = route.body === 'optional-json' && raw.length === 0 ? {} : parseJson(raw);
      return answer(route, ctx, admission);
    });
  }

  /** The admitted request's handler and its reply. */
  function answer(route: Route<D>, ctx: Ctx<D>, admission: Admission<D> | undefined): void | Promise<void> {
    // Admitted: from here on an error is the handler's own (the Control Plane's audited() records those).
    if (admission) admission.route = undefined;
    const result = route.handler(ctx);
    // Any thenable, not only a native Promise, is awaited (as `await` did before this path became synchronous).
    if (typeof (result as { then?: unknown }).then === 'function') {
      return Promise.resolve(result).then((settled) => send(ctx, settled));
    }
    send(ctx, result as HandlerResult);
  }

  function send(ctx: Ctx<D>, result: HandlerResult): void {
    if (result !== TAKEN_OVER) sendReply(ctx.res, result, ctx.method === 'HEAD');
  }

  return (req, res) => {
    const requestId = randomUUID();
    const admission: Admission<D> | undefined = opts.onRefused ? {} : undefined;
    let pending: void | Promise<void>;
    try {
      pending = handle(req, res, requestId, admission);
    } catch (err) {
      answerFailure(req, res, requestId, admission, err, opts);
      return;
    }
    pending?.catch((err: unknown) => answerFailure(req, res, requestId, admission, err, opts));
  };
}

export { HttpError };
