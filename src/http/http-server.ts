// Creates either server's node:http Server with the timeouts and connection caps they share (README "Known limits"),
// so the two cannot drift apart. Does not listen: listen.ts binds, main.ts decides when.
import { createServer, type Server } from 'node:http';
import type { RequestListener } from './pipeline.ts';
import { guardConnections, type ConnectionCounts } from './connection-guard.ts';
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from './connection-limits.ts';

/** The time bounds every connection lives under (milliseconds). */
export const SERVER_TIMEOUTS = {
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeout: 5_000,
  /** The request line and headers must have arrived within this (a silent socket gets 408 and is closed). */
  headersTimeout: 20_000,
  /** The whole request, body included, must have arrived within this (408). */
  requestTimeout: 60_000,
  /** How often Node checks the two above: a silent socket is gone at most this long after headersTimeout. */
  connectionsCheckingInterval: 5_000,
} as const;

export interface HttpServer {
  server: Server;
  connections: ConnectionCounts;
}

export function createHttpServer(
  listener: RequestListener, limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS,
): HttpServer {
  // requireHostHeader is off so a Host-less HTTP/1.1 request gets the pipeline's envelope, not Node's bare 400.
  const server = createServer({ ...SERVER_TIMEOUTS, requireHostHeader: false }, listener);
  return { server, connections: guardConnections(server, limits) };
}
