// One error type for both servers, and the one table from the wire's error codes to HTTP statuses (DESIGN §4): a
// handler throws HttpError(code, message), never a status. The codes are the wire's, not src/errors.ts's.

import { SvcError, errorMessage, type SvcErrorCode } from '../errors.ts';
import type { Logger } from '../log.ts';

export const errorStatus = {
  bad_request: 400,
  invalid_json: 400,
  invalid_param: 400,
  unauthorized: 401,
  invalid_signature: 401,
  loopback_only: 403,
  forbidden_host: 403,
  forbidden_origin: 403,
  proxied_request: 403,
  forbidden_source: 403,
  forbidden_run: 403,
  not_found: 404,
  method_not_allowed: 405,
  invalid_transition: 409,
  conflict: 409,
  request_timeout: 408,
  payload_too_large: 413,
  uri_too_long: 414,
  unsupported_media_type: 415,
  too_many_requests: 429,
  header_too_large: 431,
  internal_error: 500,
  not_configured: 503,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'HttpError';
    this.code = code;
    this.status = errorStatus[code];
    this.headers = headers;
  }
}

/** Names the request field an error is about, beside the spec's fixed body (docs/architecture.md). */
const ERROR_FIELD_HEADER = 'svc-error-field';

/** A field name a header can carry as it is; anything else (a client's unknown key is any text) is not sent. */
const HEADER_SAFE_FIELD = /^[A-Za-z0-9_.-]{1,100}$/;

/** 400 invalid_param about one field of the request; the response names it in the `Svc-Error-Field` header. */
export function invalidField(field: string, message: string): HttpError {
  const headers: Record<string, string> = HEADER_SAFE_FIELD.test(field) ? { [ERROR_FIELD_HEADER]: field } : {};
  return new HttpError('invalid_param', message, headers);
}

/** GET /ready's database check on both servers: a failing `probe` is logged (never sent) and answers 503. */
export function checkDatabase(log: Logger, probe: () => unknown): void {
  try {
    probe();
  } catch (err) {
    log.error('readiness check failed', { error: errorMessage(err) });
    throw new HttpError('unavailable', 'Database is not available');
  }
}

/** The one error envelope, exactly as the spec says: {"error":{"code","message"}}. */
export function errorBody(code: ErrorCode, message: string): { error: { code: ErrorCode; message: string } } {
  return { error: { code, message } };
}

/** svc's typed errors on the wire; `failed` stays a 500: its message may carry what the request cannot see. */
const SVC_ERROR_CODES: Readonly<Record<SvcErrorCode, ErrorCode | null>> = {
  usage: 'bad_request',
  bad_input: 'bad_request',
  bad_setting: 'not_configured',
  not_found: 'not_found',
  conflict: 'conflict',
  refused: 'conflict',
  unavailable: 'unavailable',
  failed: null,
};

/** The HttpError an error answers as (itself, or a typed svc error's), or null for a server failure (a 500). */
export function httpErrorOf(err: unknown): HttpError | null {
  if (err instanceof HttpError) return err;
  if (!(err instanceof SvcError)) return null;
  const code = SVC_ERROR_CODES[err.code];
  return code === null ? null : new HttpError(code, err.message);
}
