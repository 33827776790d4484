// Outbound POSTs for completion summaries: HTTPS only, bounded time and response size, optional extra CA (tests).
import { request } from 'node:https';

export interface PostResult {
  status: number;
  text: string;
}

/** Sends a JSON body; rejects on network errors, resolves with any HTTP status. */
export type Poster = (url: URL, headers: Record<string, string>, body: string) => Promise<PostResult>;

const RESPONSE_CAP = 256 * 1024;

export function createHttpsPoster(opts: { ca?: string | Buffer; timeoutMs?: number } = {}): Poster {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return (url, headers, body) =>
    new Promise((resolve, reject) => {
      if (url.protocol !== 'https:') {
        reject(new Error(`refusing to send to a non-https address (${url.protocol})`));
        return;
      }
      const req = request(
        url,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'content-length': String(Buffer.byteLength(body)),
            ...headers,
          },
          timeout: timeoutMs,
          ...(opts.ca ? { ca: opts.ca } : {}),
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            if (text.length < RESPONSE_CAP) text += d;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(body);
    });
}
