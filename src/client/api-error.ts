// The one error a client call throws: status and code from the server's {"error":{"code","message"}} envelope, and
// the request field the error is about from the Svc-Error-Field header, so a caller never parses the message.

/**
 * The header a Control Plane error names its field in (src/http/http-error.ts ERROR_FIELD_HEADER). Written out here
 * because src/client imports nothing server-side; the client test against a real Control Plane keeps the two equal.
 */
const ERROR_FIELD_HEADER = 'svc-error-field';

export class ControlApiError extends Error {
  readonly status: number;
  readonly code: string;
  /** The request field the server named (a setting's key for PUT /v1/config), or null when it named none. */
  readonly field: string | null;

  /** status 0 with code "unreachable" means no HTTP answer at all (refused, DNS, timeout). */
  constructor(status: number, code: string, message: string, field: string | null = null) {
    super(message);
    this.name = 'ControlApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** Builds the error from a non-2xx response, tolerating proxies that answer with HTML or nothing. */
export async function errorFromResponse(res: Response): Promise<ControlApiError> {
  const field = res.headers.get(ERROR_FIELD_HEADER);
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    const code = body.error?.code;
    const message = body.error?.message;
    if (typeof code === 'string' && typeof message === 'string') {
      return new ControlApiError(res.status, code, message, field);
    }
  } catch {
    // not the envelope: fall through to a generic error
  }
  return new ControlApiError(res.status, 'http_error', `HTTP ${res.status} ${res.statusText}`.trim(), field);
}
