// Stand-ins for the egress gate's tests: loopback upstreams (HTTP, HTTPS with a throwaway openssl certificate,
// raw TCP), a recording connect function, a stand-in resolver, and clients that speak to the gate as a proxy.
// Everything here touches loopback addresses only.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { Socket, connect as netConnect, createServer as createTcpServer, isIP, type AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tcpConnect, type ConnectFn } from '../../src/gate/context.ts';
import { readClientHello } from '../../src/gate/client-hello.ts';
import type { Resolver } from '../../src/gate/policy.ts';
import type { Gate } from '../../src/gate/gate.ts';
import { makeCert as makeCertFor, type Cert } from '../trigger/standins.ts';

export type { Cert };

/** A self-signed certificate for model.test, 127.0.0.1 and 127.0.0.2 (the trigger tests' maker, one day). */
export function makeCert(dir: string): Cert {
  return makeCertFor(dir, 'model.test', ['DNS:model.test', 'IP:127.0.0.1', 'IP:127.0.0.2']);
}

export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'svc-gate-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Upstream {
  port: number;
  seen: Seen[];
  close(): Promise<void>;
}

/** An HTTP(S) server on `host` that records each request and answers `upstream <method> <url>`. */
export async function startUpstream(host: string, cert: Cert | null = null): Promise<Upstream> {
  const seen: Seen[] = [];
  const server: Server = cert ? createHttpsServer({ key: cert.key, cert: cert.cert }) : createHttpServer();
  server.on('request', (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': 'yes' });
      res.end(`upstream ${req.method} ${req.url}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

export interface Recorder {
  connect: ConnectFn;
  calls: Array<{ address: string; port: number }>;
}

/** Whether a test may open a connection to this address: 127.0.0.0/8 and ::1 only. */
export function isLoopback(address: string): boolean {
  return /^127\.\d+\.\d+\.\d+$/.test(address) || address === '::1';
}

/**
 * A connect function that records every call and connects only to loopback: anything else gets a socket that
 * fails at once (ETESTGUARD), so even a broken gate under test cannot send a packet off this machine.
 */
export function recordingConnect(): Recorder {
  const calls: Recorder['calls'] = [];
  return {
    calls,
    connect: (address, port) => {
      calls.push({ address, port });
      if (isLoopback(address)) return tcpConnect(address, port);
      const socket = new Socket();
      const refused = Object.assign(new Error('test guard: not loopback'), { code: 'ETESTGUARD' });
      process.nextTick(() => socket.destroy(refused));
      return socket;
    },
  };
}

/** A resolver from a fixed table; counts lookups per name. Unknown names fail like NXDOMAIN. */
export function tableResolver(table: Record<string, string[]>): { resolve: Resolver; lookups: string[] } {
  const lookups: string[] = [];
  return {
    lookups,
    resolve: async (host) => {
      lookups.push(host);
      const found = table[host];
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return found;
    },
  };
}

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface GateAddress {
  port?: number;
  /** The client's own loopback address (a second "pod"): 127.0.0.1 when unset. */
  localAddress?: string;
}

function via(gate: GateAddress): { host: string; port: number; localAddress?: string } {
  return { host: '127.0.0.1', port: gate.port ?? 0, ...(gate.localAddress ? { localAddress: gate.localAddress } : {}) };
}

/** A listening socket handed to `gate` as a sandbox's spawn hands its port (spawn-group.ts): its address. */
export async function handTo(gate: Gate): Promise<{ port: number }> {
  const listener = createTcpServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const { port } = listener.address() as AddressInfo;
  gate.serve(listener);
  return { port };
}

/** `Proxy-Authorization` carrying a job credential, as a client sends it from `http://svc:<credential>@gate`. */
export function proxyAuth(credential: string): Record<string, string> {
  return { 'proxy-authorization': `Basic ${Buffer.from(`svc:${credential}`).toString('base64')}` };
}

/** One request to the gate with exactly this request target (absolute-form, or origin-form for /_model/). */
export function gateRequest(
  gate: GateAddress, target: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const method = opts.method ?? 'GET';
    const req = request({ ...via(gate), method, path: target, headers: opts.headers, agent: false });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** CONNECT through the gate: the tunnel socket when the gate answered 200, else the refusal. */
export function gateConnect(
  gate: GateAddress, authority: string, headers: Record<string, string> = {},
): Promise<{ socket: Socket } | Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ ...via(gate), method: 'CONNECT', path: authority, headers, agent: false });
    req.on('connect', (res, socket, head) => {
      if (res.statusCode === 200) {
        if (head.length) socket.unshift(head);
        resolve({ socket });
        return;
      }
      let body = head.toString('utf8');
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (body += d));
      socket.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Writes `text` on a new connection to the gate; resolves with every byte the gate answered once it closed. */
export function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write(text));
    socket.on('data', (d: string) => (answer += d));
    socket.on('end', () => {
      socket.end();
      resolve(answer);
    });
    socket.on('error', reject);
  });
}

/** A plain HTTP/1.1 GET written on an open tunnel; resolves with the raw response text once the server closes. */
export function getOverSocket(socket: Socket, host: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (text += d));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
  });
}

/**
 * TLS over an open tunnel to `host` (the name the certificate is checked against; no SNI for an IP literal), with
 * `servername` sent instead when given, then an HTTP/1.1 GET; resolves with the raw response once the server closes,
 * rejects when the handshake fails (the gate refused the hello).
 */
export function getOverTls(
  socket: Socket, host: string, path: string, ca: Buffer, servername?: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const bare = host.replace(/^\[|\]$/g, '');
    const sni = servername ?? (isIP(bare) ? undefined : bare);
    const tls = tlsConnect({ socket, host: bare, servername: sni, ca });
    let text = '';
    tls.setEncoding('utf8');
    tls.on('secureConnect', () => {
      tls.write(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
    });
    tls.on('data', (d: string) => (text += d));
    tls.on('end', () => resolve(text));
    tls.on('error', reject);
  });
}

/** One connection's bytes as a raw upstream saw them, complete once the gate closed it. */
export interface RawConnection {
  bytes: Promise<string>;
}

export interface RawUpstream {
  port: number;
  connections: RawConnection[];
  close(): Promise<void>;
}

/** Where the first request in `text` ends (head plus body by its own framing), or -1 when it is not all there. */
export function requestEnd(text: string): number {
  const head = text.indexOf('\r\n\r\n');
  if (head < 0) return -1;
  const lines = text.slice(0, head).toLowerCase().split('\r\n');
  const field = (name: string) => lines.find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
  const start = head + 4;
  if (field('transfer-encoding') === 'chunked') {
    let at = start;
    for (;;) {
      const eol = text.indexOf('\r\n', at);
      if (eol < 0) return -1;
      const size = parseInt(text.slice(at, eol), 16);
      if (Number.isNaN(size)) return -1;
      if (size === 0) return text.indexOf('\r\n\r\n', eol) < 0 ? -1 : text.indexOf('\r\n\r\n', eol) + 4;
      at = eol + 2 + size + 2;
      if (at > text.length) return -1;
    }
  }
  const length = Number(field('content-length') ?? '0');
  return text.length >= start + length ? start + length : -1;
}

/** How many HTTP/1.1 requests a byte stream holds, each read by its own framing (what a destination would see). */
export function countRequests(text: string): number {
  let count = 0;
  let rest = text;
  while (rest.length > 0) {
    const end = requestEnd(rest);
    count += 1;
    if (end < 0) break;
    rest = rest.slice(end);
  }
  return count;
}

/**
 * A raw TCP server on `host` that keeps every byte each connection sends and answers the first complete request
 * with a small 200 (keep-alive, so whatever else the gate writes still arrives).
 */
export async function startRawUpstream(host: string): Promise<RawUpstream> {
  const connections: RawConnection[] = [];
  const server = createTcpServer((socket) => {
    let text = '';
    let answered = false;
    socket.setEncoding('latin1');
    socket.on('error', () => {});
    connections.push({
      bytes: new Promise((resolve) => socket.on('close', () => resolve(text))),
    });
    socket.on('data', (d: string) => {
      text += d;
      if (!answered && requestEnd(text) >= 0) {
        answered = true;
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The ClientHello node's TLS client sends for `servername` (undefined: none), as the first bytes on the wire. */
export async function captureHello(servername: string | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer((socket) => {
      let seen = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => {
        seen = Buffer.concat([seen, d]);
        if (readClientHello(seen).kind !== 'more') {
          socket.destroy();
          server.close();
          resolve(seen);
        }
      });
    });
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as AddressInfo).port;
      const tls = tlsConnect({ host: '127.0.0.1', port, servername });
      tls.on('error', () => {});
    });
    server.on('error', reject);
  });
}
