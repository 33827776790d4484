// Outbound HTTPS with a bounded time and response size and an optional extra CA.

/** `retryAfterMs`: how long a 429 or 503 asks to wait (its `Retry-After` in seconds), where it says. */
type PostResult = { status: number; text: string; retryAfterMs?: number };

/** A `Retry-After` of whole seconds (every vendor svc posts to writes that form); a date or anything else is unsaid. */
function retryAfterMs(value: string | string[] | undefined): { retryAfterMs?: number } {
  return typeof value === 'string' && /^\d{1,6}$/.test(value.trim()) ? { retryAfterMs: Number(value) * 1000 } : {};
}

/** Sends a JSON body; rejects on network errors, resolves with any HTTP status. */
export type Poster = (url: URL, headers: Record<string, string>, body: string, method?: string) => Promise<PostResult>;

interface HttpsOptions {
  method: string;
  headers: Record<string, string>;
  ca?: string | Buffer | undefined;
  timeoutMs: number;
  /** Bytes of the answer kept (cut before decoding: never half a character's UTF-16 pair); the rest is dropped. */
  cap?: number;
}

/** One request to an https URL (anything else is refused before a byte is sent). */
export function httpsRequest(url: URL | string, opts: HttpsOptions, body?: string): Promise<PostResult> {
  return new Promise((resolve, reject) => {
    const protocol = new URL(url).protocol;
    if (protocol !== 'https:') {
      reject(new Error(`refusing to send to a non-https address (${protocol})`));
      return;
    }
    const { method, headers, ca, timeoutMs, cap = Infinity } = opts;
    // node:https as CommonJS, taken when a post is sent: see test/unit/http-imports.test.ts.
    const { request } = process.getBuiltinModule('node:https');
    const req = request(url, { method, headers, ...(ca ? { ca } : {}) }, (res) => {
      const kept: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        if (size >= cap) return;
        const part = d.subarray(0, cap - size);
        kept.push(part);
        size += part.length;
      });
      res.on('end', () => {
        clearTimeout(deadline);
        const text = Buffer.concat(kept).toString('utf8');
        resolve({ status: res.statusCode ?? 0, text, ...retryAfterMs(res.headers['retry-after']) });
      });
      res.on('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
    });
    // The whole exchange, not only a silence: an answer that trickles for ever would hold its caller for ever.
    const deadline = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    req.end(body);
  });
}

export function createHttpsPoster(opts: { ca?: string | Buffer; cap?: number; timeoutMs?: number } = {}): Poster {
  return (url, headers, body, method = 'POST') => httpsRequest(url, {
    method,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      ...headers,
    },
    ca: opts.ca,
    timeoutMs: opts.timeoutMs ?? 10_000,
    cap: opts.cap ?? 256 * 1024,
  }, body);
}
