// How the pipeline answers a request that failed: a refusal (an HttpError, from a guard or a handler) gets the error
// envelope and, for a mutating request refused before its handler ran, the onRefused hook; a database another process
// keeps locked is a 503 with Retry-After; anything else is a 500 that names the request id and logs the cause.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, httpErrorOf, isHttpError, type HttpError } from './http-error.ts';
import { sendReply } from './respond.ts';
import { closeAfterRefusal } from './close-after-refusal.ts';
import { isDatabaseBusy } from './busy-database.ts';
import type { Admission, PipelineOptions, Route } from './pipeline-types.ts';
import { errorMessage } from '../errors.ts';

const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

function reportRefusal<D>(
  route: Route<D>, params: Record<string, string>, req: IncomingMessage, requestId: string, error: HttpError,
  opts: PipelineOptions<D>,
): void {
  try {
    const method = req.method ?? 'GET';
    const peer = req.socket.remoteAddress ?? '';
    opts.onRefused!({ route, params, method, req, peer, requestId, error });
  } catch (err) {
    // The refusal is answered either way; a failing hook is logged, never turned into a 500.
    const message = errorMessage(err);
    opts.log.error('refusal hook failed', { request_id: requestId, error: message });
  }
}

export function answerFailure<D>(
  req: IncomingMessage, res: ServerResponse, requestId: string, admission: Admission<D> | undefined, thrown: unknown,
  opts: PipelineOptions<D>,
): void {
  // A typed svc error escaping a handler is its own answer (http-error.ts httpErrorOf), not a crash.
  const err = httpErrorOf(thrown) ?? thrown;
  if (isHttpError(err)) {
    if (admission?.route && !SAFE_METHODS.has(req.method ?? 'GET')) {
      reportRefusal(admission.route, admission.params ?? {}, req, requestId, err, opts);
    }
    closeAfterRefusal(req, res);
    try {
      sendReply(res, { status: err.status, headers: err.headers, body: errorBody(err.code, err.message) });
    } catch (sendErr) {
      // A header the error carried that Node will not write must not leave the request unanswered.
      if (res.headersSent) return void res.destroy();
      opts.log.error('error reply failed', { request_id: requestId, error: String(sendErr) });
      sendReply(res, { status: err.status, body: errorBody(err.code, err.message) });
    }
    return;
  }
  if (isDatabaseBusy(err)) {
    opts.log.warn('database busy: another process holds its write lock', { request_id: requestId });
    closeAfterRefusal(req, res);
    const message = 'The database is busy (another process holds its write lock); try again';
    sendReply(res, { status: 503, headers: { 'retry-after': '1' }, body: errorBody('unavailable', message) });
    return;
  }
  const error = errorMessage(err);
  opts.log.error('unhandled error', { request_id: requestId, error });
  closeAfterRefusal(req, res);
  sendReply(res, { status: 500, body: errorBody('internal_error', `Internal error (request ${requestId})`) });
}
