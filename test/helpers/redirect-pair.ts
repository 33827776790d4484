// A loopback server that answers every request with a redirect to another loopback port, and the server there, which
// records whatever reaches it: a client that followed would carry its token or body to an origin it was not made for
// (DESIGN §7a "a credential goes only to the origin it was made for").
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Reached {
  method: string;
  path: string;
  authorization: string | undefined;
  body: string;
}

export interface RedirectPair {
  /** The address that redirects: a client is pointed here. */
  url: string;
  /** The other port's address, where each redirect points (with the request's own path). */
  target: string;
  /** The requests that reached `target`. */
  reached: Reached[];
  close(): Promise<void>;
}

function listening(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }));
}

export async function startRedirectPair(status: 301 | 302 | 307 | 308 = 307): Promise<RedirectPair> {
  const reached: Reached[] = [];
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      reached.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const target = await listening(receiver);
  const redirector = createServer((req, res) => {
    req.resume();
    res.writeHead(status, { location: `${target}${req.url ?? '/'}` }).end();
  });
  const url = await listening(redirector);
  const close = (server: Server) => new Promise<void>((done) => server.close(() => done()));
  return { url, target, reached, close: async () => void await Promise.all([close(redirector), close(receiver)]) };
}
