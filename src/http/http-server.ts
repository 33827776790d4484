// The node:http server both servers share, so the two cannot drift apart: its timeouts and connection caps (README
// "Known limits"), the envelope for requests Node's parser refuses, binding, and shutting down.
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestListener } from './pipeline.ts';
import { errorBody, errorStatus, type ErrorCode } from './http-error.ts';
import { JSON_TYPE } from './respond.ts';
import { settingInt } from '../settings-registry.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

// node:http as CommonJS, not an ESM import: see test/unit/http-imports.test.ts.
const { createServer } = process.getBuiltinModule('node:http');

/** Headers and the whole request must arrive within theirs (else 408 and closed). */
const SERVER_TIMEOUTS = {
  keepAliveTimeout: 5_000,
  headersTimeout: 20_000,
  requestTimeout: 60_000,
  connectionsCheckingInterval: 5_000,
} as const;

export function createHttpServer(listener: RequestListener, limits: ConnectionLimits) {
  // requireHostHeader is off so a Host-less HTTP/1.1 request gets the pipeline's envelope, not Node's bare 400.
  const server = createServer({ ...SERVER_TIMEOUTS, requireHostHeader: false }, listener);
  return { server, connections: guardConnections(server, limits) };
}

type ConnectionLimits = ReturnType<typeof readConnectionLimits>;

/** Open connections of the whole server, and from one peer address: `_MAX_CONNECTIONS`, `_MAX_CONNECTIONS_PER_PEER`. */
export function readConnectionLimits(env: NodeJS.ProcessEnv, server: 'control' | 'trigger') {
  const [all, peer] = server === 'control'
    ? ['SVC_CONTROL_MAX_CONNECTIONS', 'SVC_CONTROL_MAX_CONNECTIONS_PER_PEER'] as const
    : ['SVC_TRIGGER_MAX_CONNECTIONS', 'SVC_TRIGGER_MAX_CONNECTIONS_PER_PEER'] as const;
  const total = settingInt(env, all);
  return { total, perPeer: settingInt(env, peer, { max: total }) };
}

/** Counts the open connections it admitted (a refused one never is). */
function guardConnections(server: Server, limits: ConnectionLimits) {
  const perPeer = new Map<string, number>();
  let total = 0;
  // First in line: a refused socket is answered and closed before the HTTP parser is told about it.
  server.prependListener('connection', (socket: Socket) => {
    // `::ffff:127.0.0.1` and `127.0.0.1` are one peer.
    const address = socket.remoteAddress ?? '';
    const peer = address.startsWith('::ffff:') ? address.slice(7) : address;
    const mine = perPeer.get(peer) ?? 0;
    if (total >= limits.total || mine >= limits.perPeer) {
      const which = total >= limits.total
        ? `${limits.total} connections in total`
        : `${limits.perPeer} connections from ${peer}`;
      rawReply(socket, 'unavailable', `Too many open connections: the server allows ${which}`, { 'retry-after': '5' });
      return;
    }
    total++;
    perPeer.set(peer, mine + 1);
    socket.once('close', () => {
      total--;
      const left = (perPeer.get(peer) ?? 1) - 1;
      if (left === 0) perPeer.delete(peer);
      else perPeer.set(peer, left);
    });
  });
  return { total: () => total };
}

/** Node's parser error code → our code; anything not listed is a plain 400. */
const PARSER_CODES: Record<string, ErrorCode> = {
  HPE_HEADER_OVERFLOW: 'header_too_large',
  HPE_URI_TOO_LONG: 'uri_too_long',
  ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout',
  HPE_HEADERS_TIMEOUT: 'request_timeout',
};

/** Answers with the envelope, then destroys the socket: a half-closed one stays until a silent peer hangs up. */
function rawReply(socket: Duplex, code: ErrorCode, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorBody(code, message));
  const status = errorStatus[code];
  let extra = '';
  for (const [name, value] of Object.entries(headers)) extra += `${name}: ${value}\r\n`;
  socket.on('error', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${code}\r\ncontent-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `cache-control: no-store\r\nx-content-type-options: nosniff\r\nconnection: close\r\n${extra}\r\n${body}`,
    () => socket.destroy(),
  );
}

/** Requests Node's parser refuses, and CONNECT, never reach a route: they get the envelope all the same. */
function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already in flight on this socket (pipelining) must not get raw bytes spliced into it.
    const inFlight = (socket as unknown as { _httpMessage?: unknown })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight) {
      socket.destroy();
      return;
    }
    const code = PARSER_CODES[err.code ?? ''] ?? 'bad_request';
    rawReply(socket, code, code === 'bad_request' ? 'malformed HTTP request' : 'request refused before routing');
  });
  server.on('connect', (_req, socket: Duplex) => {
    rawReply(socket, 'method_not_allowed', 'CONNECT is not supported');
  });
}

/** Resolves with the base URL once bound (port 0 → the port the OS gave); rejects with the bind error. */
export async function listen(server: Server, host: string, port: number): Promise<{ url: string; port: number }> {
  answerClientErrors(server);
  const listening = once(server, 'listening');
  server.listen(port, host);
  await listening;
  // A host and a port always bind TCP: the address is never a pipe's name.
  const bound = (server.address() as AddressInfo).port;
  return { url: `http://${urlAuthority(host, bound)}`, port: bound };
}

/** `host:port` as a URL writes it: an IPv6 literal goes in brackets (RFC 3986 §3.2.2). */
export function urlAuthority(host: string, port: number | string): string {
  return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

const GRACE_MS = 2_000;

/** Stops accepting, ends idle connections, runs `whileDraining` (streams), waits for the rest, GRACE_MS at most. */
export async function closeGracefully(server: Server, whileDraining: () => void | Promise<void>): Promise<void> {
  // Listen for 'close' before anything can await: with no open connections it fires on the next tick, and a
  // listener attached later would never run (the unref'd timer then lets the process exit mid-shutdown).
  const closed = new Promise<void>((resolve) => server.once('close', () => resolve()));
  server.close();
  await whileDraining();
  // A stream ended while draining left its connection idle (keep-alive): end it now, not after the grace.
  server.closeIdleConnections();
  if (await Promise.race([closed, sleep(GRACE_MS, 'grace', { ref: false })]) === 'grace') server.closeAllConnections();
}

/** A server's close: `stop` runs once, whoever calls first (a signal, a test), and every call awaits that one run. */
export function closeOnce(stop: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= stop());
}

/** The exit code after the first SIGINT or SIGTERM (a second one ends the process at once): 1 if `stop` failed. */
export function exitCodeAfterSignal(log: Logger, message: string, stop: () => Promise<void>): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      // A second signal of either kind ends the process at once: by exit, not the signal's default action, which the
      // kernel ignores for a container's PID 1 (bin/svc execs node).
      if (stopping) process.exit(128 + osConstants.signals[signal]);
      stopping = true;
      log.info(message, { signal });
      stop().then(
        () => resolve(0),
        (err: unknown) => {
          log.error('shutdown failed', { error: errorMessage(err) });
          resolve(1);
        },
      );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
