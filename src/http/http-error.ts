// One error type for both servers; the status comes from the code so the two can't disagree (DESIGN §4). This is the
// one table from codes to HTTP statuses: a handler throws HttpError(code, message), never a status. The codes are
// the wire's (the error envelope's), not src/errors.ts's: a handler turns a domain error into one of these on purpose.

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

export function isHttpError(value: unknown): value is HttpError {
  return value instanceof HttpError;
}

/** The one error envelope: {"error":{"code","message"}}. */
export function errorBody(code: ErrorCode, message: string): { error: { code: ErrorCode; message: string } } {
  return { error: { code, message } };
}
