// A raw HTTP/1.1 client for tests that need what fetch forbids: any Host header, literal `..` in paths, chunked bodies.
import { request } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export interface RawOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Sent with a Content-Length. */
  body?: string | Buffer;
  /** Sent with Transfer-Encoding: chunked and no Content-Length, one write per chunk. */
  chunks?: Array<string | Buffer>;
  /** Connect here instead of the URL's host (e.g. 127.0.0.1 for a server bound to 0.0.0.0). */
  connectHost?: string;
}

/** Sends exactly the path given (no normalisation) and resolves with the response, even if the server cut the upload. */
export function rawRequest(baseUrl: string, path: string, opts: RawOptions = {}): Promise<RawResponse> {
  const base = new URL(baseUrl);
  const headers: Record<string, string> = { host: base.host, connection: 'close', ...opts.headers };
  if (opts.body !== undefined) headers['content-length'] ??= String(Buffer.byteLength(opts.body));
  return new Promise((resolve, reject) => {
    const req = request({
      host: opts.connectHost ?? base.hostname.replace(/^\[|\]$/g, ''),
      port: base.port,
      method: opts.method ?? 'GET',
      path,
      headers,
      setHost: false,
    });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('error', () => {});
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    // A server that answers 413 mid-upload may reset the socket; the answer already received is what counts.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (opts.chunks) {
      (async () => {
        for (const chunk of opts.chunks!) {
          if (answered || req.destroyed) break;
          if (!req.write(chunk)) await new Promise((r) => req.once('drain', r));
        }
        req.end();
      })().catch(() => {});
    } else {
      req.end(opts.body);
    }
  });
}
