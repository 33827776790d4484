// A git host for tests: HTTPS on 127.0.0.1, git's smart-HTTP protocol served by git's own `git http-backend` (CGI),
// so a real `git push` lands in a real bare repository under `root`. It asks for Basic credentials (401) the way
// GitHub does, accepts only `password` when one is given, and records every request with its Authorization header.
import { createServer, type Server } from 'node:https';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { spawn, execFileSync } from 'node:child_process';
import { join } from 'node:path';

export interface GitRequest {
  method: string;
  path: string;
  /** The Authorization header as sent, or null. */
  authorization: string | null;
}

export interface GitHttpsHost {
  /** https://127.0.0.1:<port>; a repository `<root>/<owner>/<name>.git` is at `${url}/<owner>/<name>.git`. */
  url: string;
  requests: GitRequest[];
  close(): Promise<void>;
}

const BACKEND = join(execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim(), 'git-http-backend');

/** `Basic x-access-token:<token>` decoded to its password, or null. */
export function basicPassword(header: string | null): string | null {
  if (!header?.startsWith('Basic ')) return null;
  const text = Buffer.from(header.slice(6), 'base64').toString('utf8');
  return text.slice(text.indexOf(':') + 1);
}

/**
 * Passes a request under /api/v3/ to the REST stand-in at `api` (plain http, path without /api/v3), as GitHub
 * Enterprise serves its API on the git host's own origin: the push token's origin is then the API's too.
 */
function toApi(api: string, req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').slice('/api/v3'.length) || '/';
  const out = httpRequest(`${api}${path}`, { method: req.method, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  out.on('error', () => res.writeHead(502).end());
  req.pipe(out);
}

export async function startGitHttpsHost(
  opts: { root: string; key: Buffer; cert: Buffer; password: string | null; api?: string },
): Promise<GitHttpsHost> {
  const requests: GitRequest[] = [];
  const server: Server = createServer({ key: opts.key, cert: opts.cert }, (req, res) => {
    if (opts.api && req.url?.startsWith('/api/v3/')) return toApi(opts.api, req, res);
    const authorization = req.headers.authorization ?? null;
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorization });
    const given = basicPassword(authorization);
    if (given === null || (opts.password !== null && given !== opts.password)) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git stand-in"' }).end();
      req.resume();
      return;
    }
    const cgi = spawn(BACKEND, [], {
      env: {
        PATH: process.env.PATH, GIT_PROJECT_ROOT: opts.root, GIT_HTTP_EXPORT_ALL: '1', REMOTE_USER: 'x-access-token',
        REMOTE_ADDR: '127.0.0.1', REQUEST_METHOD: req.method ?? 'GET', PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1), CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '', GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(cgi.stdin);
    // CGI output: header lines, a blank line, then the body as is.
    let head = Buffer.alloc(0);
    let started = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n') >= 0 ? head.indexOf('\r\n\r\n') : head.indexOf('\n\n');
      if (end < 0) return;
      const sep = head[end] === 0x0d ? 4 : 2;
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head.subarray(0, end).toString('utf8').split(/\r?\n/)) {
        const i = line.indexOf(':');
        const name = line.slice(0, i).trim().toLowerCase();
        const value = line.slice(i + 1).trim();
        if (name === 'status') status = Number(value.split(' ')[0]);
        else if (name) headers[name] = value;
      }
      res.writeHead(status, headers);
      started = true;
      res.write(head.subarray(end + sep));
    });
    cgi.on('close', () => (started ? res.end() : res.writeHead(502).end()));
  });
  // Used as a proxy, it is asked to CONNECT: recorded with its Proxy-Authorization, then refused.
  server.on('connect', (req, socket) => {
    requests.push({ method: 'CONNECT', path: req.url ?? '', authorization: req.headers['proxy-authorization'] ?? null });
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `https://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
