// What every gate handler gets (resolver and connect injectable, so tests prove the address rules without a packet
// leaving the machine), who is asking (clientBook), and the one place a refusal is rendered.
import { connect as netConnect, type Socket } from 'node:net';
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { GatePolicy, Resolver } from './policy.ts';
import { credentialFromProxyAuthorization, verifyJobCredential, type JobIdentity } from './job-credential.ts';
import type { ModelRoute } from './model-apis.ts';
import type { EgressRecord } from './evidence.ts';
import type { PriceTable } from './prices.ts';
import type { RunRecords } from './run-records.ts';
import { OpenSpan, parseTraceparent, type SpanContext, type Tracer } from '../trace.ts';

// node:http as CommonJS, not an ESM import: see test/unit/http-imports.test.ts.
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/** Opens a TCP connection to an address the gate has already checked (an IP literal, never a name). */
export type ConnectFn = (address: string, port: number) => Socket;

export function tcpConnect(address: string, port: number): Socket {
  return netConnect({ host: address, port, noDelay: true });
}

/** docs/gate.md "Limits" says what each bounds. */
export const DEFAULT_LIMITS = {
  maxHeaderBytes: 16 * 1024,
  maxConnections: 256,
  maxConnectionsPerPeer: 256,
  idleMs: 10 * 60_000,
  connectTimeoutMs: 10_000,
};

export type GateLimits = typeof DEFAULT_LIMITS;

export interface GateContext {
  resolve: Resolver;
  connect: ConnectFn;
  models: ReadonlyMap<string, ModelRoute>;
  /** Trust for TLS to model APIs instead of the system roots: test upstreams only. */
  ca: string | Buffer | Array<string | Buffer> | undefined;
  limits: GateLimits;
  /** The record of a connection `asker` made (its span ends with it); none for a client refused before admission. */
  record(record: EgressRecord, asker?: Asker): void;
  meter: GateMeter | null;
  /** Null: tracing off. */
  trace: GateTrace | null;
  /** What the gate keeps of each run: its records, and its share of span exports. */
  runs: RunRecords;
}

/** docs/gate.md "Metered cost" and "Budgets". */
export interface GateMeter {
  prices: PriceTable;
  /** Why this asker may make no further model call now (a budget reached), or null. */
  refusal(asker: Asker): string | null;
  /** A shared gate's bound on a run's calls under way: the admitted call's release (safe to call more than once: it
   * counts once), or why it must wait (a 429). */
  hold?(asker: Asker): (() => void) | string;
  /** A run's own gate: a CONNECT tunnel of the run opened (a shared gate counts each run's in its RunRecords). */
  tunnel?(): void;
}

/** A refusal as plain text; the connection closes after it. */
export function refuse(
  res: ServerResponse, status: number, reason: string, headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent) return void res.destroy();
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

/** A shared gate's clients, each with its job's credential (docs/gate.md "Security: what each client may do"). */
export interface GateClients {
  secret: Buffer;
  policyFor(who: JobIdentity): GatePolicy;
  /** Client connections one job may hold open at once. */
  maxPerClient: number;
}

/** Who a request is from: the policy it gets and the job it is recorded for (null on a run's own gate). */
export interface Asker {
  policy: GatePolicy;
  who: JobIdentity | null;
  /** The `traceparent` the gate sends upstream names it as the parent; null: untraced. */
  span: OpenSpan | null;
}

/** Each connection is a span of its run's trace, which the gate knows and the client never names (deploy.md#traces). */
export interface GateTrace {
  tracer: Tracer;
  /** A run's own gate: the run's span. A shared gate: null (each credential names its job's). */
  parent: SpanContext | null;
}

// Half of each gate span id is an HMAC of the other half and the trace: a relayed span reusing one (learnt from a
// traceparent a destination saw) is told apart without remembering every id the gate gave out.
const SPAN_KEY = randomBytes(32);

export function gateSpanId(traceId: string, head = randomBytes(4).toString('hex')): string {
  return head + createHmac('sha256', SPAN_KEY).update(traceId + head).digest('hex').slice(0, 8);
}

function connectionSpan(
  trace: GateTrace | null, parent: SpanContext | null, who: JobIdentity | null, target: string,
): OpenSpan | null {
  // Reading the run's own records back (`/_egress`) is no connection out: no span.
  if (!trace || !parent || target === '/_egress') return null;
  const attributes = who ? { 'svc.job_id': who.job, 'svc.run': who.run } : {};
  const spanId = gateSpanId(parent.traceId);
  return new OpenSpan(trace.tracer, 'svc.gate.connection', parent, { kind: 'client', attributes, spanId });
}

/** Ends a connection's span with where it went and what was decided: never a path, header or body. */
export function endConnectionSpan(asker: Asker | undefined, r: EgressRecord): void {
  asker?.span?.end(r.decision === 'allowed' ? 'ok' : 'error', {
    'svc.gate.kind': r.kind, 'server.address': r.host.slice(0, 253), 'server.port': r.port,
    'svc.gate.decision': r.decision, 'svc.gate.model_api': r.model, 'http.response.status_code': r.status,
    'svc.gate.bytes_up': r.bytesUp, 'svc.gate.bytes_down': r.bytesDown,
  });
}

export type Admission =
  | { admitted: true; asker: Asker; url: string }
  | { admitted: false; status: 407 | 429; reason: string; who: JobIdentity | null; url: string };

export type ClientBook = (req: IncomingMessage) => Admission;

// `/_job/<credential>` before a model API path, `/_egress` (the run's own records, for its pod's signer) or `/_traces`
// (its run's span exports, relayed: forward.ts).
const JOB_PREFIX = /^\/_job\/([A-Za-z0-9._-]{1,2048})(\/_model\/.*|\/_egress|\/_traces)$/;

/** Who each request is from; a shared gate's client connection belongs to the first job it spoke for. */
export function clientBook(clients: GateClients | null, policy: GatePolicy, trace: GateTrace | null): ClientBook {
  const owner = new WeakMap<Socket, string>();
  const open = new Map<string, number>();
  return (req) => {
    const url = req.url ?? '';
    if (!clients) {
      const span = connectionSpan(trace, trace?.parent ?? null, null, url);
      return { admitted: true, asker: { policy, who: null, span }, url };
    }
    const inPath = JOB_PREFIX.exec(url);
    const credential = inPath?.[1] ?? credentialFromProxyAuthorization(req.headers['proxy-authorization']);
    const target = inPath?.[2] ?? url;
    const who = credential === null ? null : verifyJobCredential(clients.secret, credential);
    if (!who) {
      const reason = credential === null ? 'a job credential is required' : 'the job credential is not valid';
      return { admitted: false, status: 407, reason, who: null, url: target };
    }
    const key = `${who.job}\u0000${who.run}`;
    const bound = owner.get(req.socket);
    if (bound !== undefined && bound !== key) {
      return { admitted: false, status: 407, reason: 'this connection belongs to another job', who, url: target };
    }
    if (bound === undefined) {
      const count = open.get(key) ?? 0;
      if (count >= clients.maxPerClient) {
        const reason = `this job already holds ${count} connections (its share of the gate)`;
        return { admitted: false, status: 429, reason, who, url: target };
      }
      owner.set(req.socket, key);
      countWhileOpen(open, key, req.socket);
    }
    const span = connectionSpan(trace, parseTraceparent(who.trace), who, target);
    return { admitted: true, asker: { policy: clients.policyFor(who), who, span }, url: target };
  };
}

/** Counts `socket` under `key` until it closes; a key back at zero is removed. */
export function countWhileOpen(open: Map<string, number>, key: string, socket: Socket): void {
  open.set(key, (open.get(key) ?? 0) + 1);
  socket.once('close', () => {
    const left = (open.get(key) ?? 1) - 1;
    if (left <= 0) open.delete(key);
    else open.set(key, left);
  });
}
