// Requests Node's parser refuses (bad request line, headers too large, timeouts) and CONNECT never reach a route:
// answer them with the same JSON envelope as every other error when the socket can still take a response.
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody, errorStatus, type ErrorCode } from './http-error.ts';
import { JSON_TYPE } from './respond.ts';

/** Parser error code → our code; anything not listed is a plain 400. */
const PARSER_CODES: Record<string, ErrorCode> = {
  HPE_HEADER_OVERFLOW: 'header_too_large',
  HPE_URI_TOO_LONG: 'uri_too_long',
  ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout',
  HPE_HEADERS_TIMEOUT: 'request_timeout',
};

/**
 * Answers with the envelope and closes: the socket is destroyed once the answer is flushed, not half-closed and kept
 * until the peer hangs up (a silent client never does, and each one held a descriptor).
 */
export function rawReply(socket: Duplex, code: ErrorCode, message: string, headers: Record<string, string> = {}): void {
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

/** A response already in flight on this socket (pipelining) must not get raw bytes spliced into it. */
function responseInFlight(socket: Duplex): boolean {
  return Boolean((socket as unknown as { _httpMessage?: unknown })._httpMessage);
}

export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable || responseInFlight(socket)) {
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
