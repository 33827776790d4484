// Loopback HTTPS stand-ins for the chat hooks host and tracker APIs, with a throwaway certificate made by openssl.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Cert {
  key: Buffer;
  cert: Buffer;
}

/** A self-signed certificate (openssl, one day) for `cn` and the subject alternative names given. */
export function makeCert(dir: string, cn = '127.0.0.1', altNames = ['IP:127.0.0.1']): Cert {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-subj', `/CN=${cn}`, '-addext', `subjectAltName=${altNames.join(',')}`, '-days', '1',
    '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' });
  return { key: readFileSync(key), cert: readFileSync(cert) };
}

export interface Recorded {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface StandIn {
  url: string;
  requests: Recorded[];
  /** Status to answer with next (default 200), the body, and any headers besides its content type; null: never. */
  respond: (req: Recorded) => { status: number; body: string; headers?: Record<string, string> } | null;
  close(): Promise<void>;
}

async function listen(server: Server, requests: Recorded[], standIn: { respond: StandIn['respond'] }, scheme: string): Promise<string> {
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      const rec = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      requests.push(rec);
      const answer = standIn.respond(rec);
      if (answer === null) return;
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export async function startStandIn(cert: Cert | null): Promise<StandIn> {
  const requests: Recorded[] = [];
  const server = cert ? createHttpsServer({ key: cert.key, cert: cert.cert }) : createHttpServer();
  const standIn: StandIn = {
    url: '',
    requests,
    respond: () => ({ status: 200, body: '{"ok":true}' }),
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
  standIn.url = await listen(server as Server, requests, standIn, cert ? 'https' : 'http');
  return standIn;
}
