// Binds an HTTP server and takes it down again, for both servers' main.ts. Installs no signal handlers and closes
// nothing but the server's connections: what else shuts down, and in which order, stays with the caller.
import type { Server } from 'node:http';
import { answerClientErrors } from './client-errors.ts';

/**
 * Answers parser errors and CONNECT with the envelope (client-errors.ts); resolves with the base URL once bound
 * (port 0 → the port the OS gave); rejects with the bind error (EADDRINUSE…).
 */
export async function listen(server: Server, host: string, port: number): Promise<{ url: string; port: number }> {
  answerClientErrors(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  return { url: `http://${urlHost(host)}:${bound}`, port: bound };
}

/** An IPv6 literal goes in brackets inside a URL (RFC 3986 §3.2.2). */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * Stops accepting and closes idle keep-alive connections, runs `whileDraining` (end streams, let work finish), then
 * waits for the open requests to end — cutting any still open `graceMs` after `whileDraining` settles.
 */
export async function closeGracefully(
  server: Server,
  whileDraining: () => void | Promise<void>,
  graceMs = 2_000,
): Promise<void> {
  // Listen for 'close' before anything can await: with no open connections it fires on the next tick, and a
  // listener attached later would never run (the unref'd timer then lets the process exit mid-shutdown).
  const closed = new Promise<void>((resolve) => server.once('close', () => resolve()));
  server.close();
  server.closeIdleConnections();
  await whileDraining();
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, graceMs);
    timer.unref();
    void closed.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
