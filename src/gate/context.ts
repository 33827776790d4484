// What every egress gate handler gets passed in: the policy, the resolver and the connect function (both
// injectable so tests prove the address rules without a packet leaving the machine), the model routes, the limits
// and the evidence sink. Also the one place a refusal is rendered.
import { connect as netConnect, type Socket } from 'node:net';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { GatePolicy, Resolver } from './policy.ts';
import type { ModelRoute } from './model-apis.ts';
import type { EgressRecord } from './evidence.ts';

/** Opens a TCP connection to an address the gate has already checked (an IP literal, never a name). */
export type ConnectFn = (address: string, port: number) => Socket;

export function tcpConnect(address: string, port: number): Socket {
  return netConnect({ host: address, port, noDelay: true });
}

export interface GateLimits {
  /** Largest request head the gate parses (node:http maxHeaderSize). */
  maxHeaderBytes: number;
  /** Client connections open at once, over every listener; more are closed at once. */
  maxConnections: number;
  /** Client connections open at once from one TCP peer address (a pod), before it has said who it is. */
  maxConnectionsPerPeer: number;
  /** A connection (either side) quiet this long is closed. Model streams can pause while the model thinks. */
  idleMs: number;
  /** Time allowed to open a connection to a destination. */
  connectTimeoutMs: number;
}

export const DEFAULT_LIMITS: GateLimits = {
  maxHeaderBytes: 16 * 1024,
  maxConnections: 256,
  maxConnectionsPerPeer: 256,
  idleMs: 10 * 60_000,
  connectTimeoutMs: 10_000,
};

export interface GateContext {
  policy: GatePolicy;
  resolve: Resolver;
  connect: ConnectFn;
  models: ReadonlyMap<string, ModelRoute>;
  /** Trust for TLS to model APIs: replaces the system roots (test upstreams only); undefined = system roots. */
  ca: string | Buffer | Array<string | Buffer> | undefined;
  limits: GateLimits;
  record(record: EgressRecord): void;
}

/** A refusal as plain text; the connection closes after it. */
export function refuse(
  res: ServerResponse, status: number, reason: string, headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  res.end(`svc gate: ${reason}\n`);
}

/** The same refusal written raw on a socket that left the HTTP parser (a CONNECT). */
export function refuseRaw(
  socket: Duplex, status: number, reason: string, headers: Readonly<Record<string, string>> = {},
): void {
  const body = `svc gate: ${reason}\n`;
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n${extra}content-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
