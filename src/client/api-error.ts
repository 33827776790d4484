// The one error a client call throws: status and code from the server's {"error":{"code","message"}} envelope.

export class ControlApiError extends Error {
  readonly status: number;
  readonly code: string;

  /** status 0 with code "unreachable" means no HTTP answer at all (refused, DNS, timeout). */
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ControlApiError';
    this.status = status;
    this.code = code;
  }
}

/** Builds the error from a non-2xx response, tolerating proxies that answer with HTML or nothing. */
export async function errorFromResponse(res: Response): Promise<ControlApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    const code = body.error?.code;
    const message = body.error?.message;
    if (typeof code === 'string' && typeof message === 'string') return new ControlApiError(res.status, code, message);
  } catch {
    // not the envelope: fall through to a generic error
  }
  return new ControlApiError(res.status, 'http_error', `HTTP ${res.status} ${res.statusText}`.trim());
}
