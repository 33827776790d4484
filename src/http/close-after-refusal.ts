// Closes the connection of a request answered before its body was read to the end: the answer goes out with
// `Connection: close`, nothing more of the body is read (it would otherwise be drained to reach the next request on
// the connection: ~12 GiB in 5 s of an endless chunked body), and the socket is destroyed shortly after.
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * How long a refused connection lingers after its answer, half-closed and not read, before it is destroyed: long
 * enough for the client to read the answer before the reset that closing on unread data sends (RFC 9112 §9.6).
 */
export const REFUSED_LINGER_MS = 1_000;

/** Call before the reply is written; does nothing for a request without a body or whose body has fully arrived. */
export function closeAfterRefusal(req: IncomingMessage, res: ServerResponse): void {
  // `complete` is still false while a bodyless request is handled synchronously, so the framing headers decide.
  const framed = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (!framed || req.complete || res.headersSent) return;
  // A paused request stops the parser reading the socket once its small buffer fills; Node does not drain a body
  // for a response that closes the connection.
  req.pause();
  res.shouldKeepAlive = false;
  res.once('finish', () => {
    const socket = res.socket ?? req.socket;
    const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}
