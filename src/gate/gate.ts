// The egress gate (DESIGN §7a, docs/gate.md): the HTTP proxy that is the sandbox's only route out. It must never
// connect to a name, only to an address it checked.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { once } from 'node:events';
import { RunRecords, boundedRecord } from './run-records.ts';
import {
  clientBook, countWhileOpen, DEFAULT_LIMITS, endConnectionSpan, refuse, refuseRaw, tcpConnect,
  type Admission, type Asker, type ClientBook, type ConnectFn, type GateClients, type GateContext, type GateLimits,
  type GateMeter, type GateTrace,
} from './context.ts';
import { systemResolver, type GatePolicy, type Resolver } from './policy.ts';
import type { ModelRoute } from './model-apis.ts';
import { arrivingRecord, type EgressRecord } from './evidence.ts';
import { createLogger, type Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';
import type { GateMetrics } from './metrics.ts';

// node:http as CommonJS, not an ESM import: see test/unit/http-imports.test.ts.
const { createServer } = process.getBuiltinModule('node:http');

interface GateOptions {
  policy: GatePolicy;
  /** Listen on TCP (port 0 = any) at `tcpHost` (default 127.0.0.1): tests, the bench, `svc gate serve`. */
  tcpPort?: number;
  tcpHost?: string;
  models?: readonly ModelRoute[];
  /** Every record, as the connection ends (or at once, when refused). */
  onRecord?: (record: EgressRecord) => void;
  resolve?: Resolver;
  connect?: ConnectFn;
  ca?: GateContext['ca'];
  limits?: Partial<GateLimits>;
  clients?: GateClients;
  /** Where the gate's own faults go (never a record's content, never a key). */
  log?: Logger;
  /** `svc gate serve` only: counts every record and answers GET /metrics. */
  metrics?: GateMetrics;
  meter?: GateMeter;
  trace?: GateTrace;
}

export interface Gate {
  /** Loads what serves a request (at the latest, the first request waits for it); a failed load closes the gate. */
  load(): Promise<void>;
  /** The TCP port when `tcpPort` was given, else null. */
  port: number | null;
  /** Serves the connections `listener` accepts (a sandbox's port, made in its network namespace: sandbox-command.ts),
   * until the gate closes, which closes it too. */
  serve(listener: NetServer): void;
  /** Closes the listeners and every open connection. */
  close(): Promise<void>;
}

/** The record of a client the gate refused before deciding anything (no or a bad credential, over its share). */
function refusedRecord(req: IncomingMessage, refusal: Admission & { admitted: false }): EgressRecord {
  const connect = req.method === 'CONNECT';
  return arrivingRecord(connect ? 'connect' : refusal.url.startsWith('/_model/') ? 'model' : 'http', refusal, {
    host: connect ? refusal.url.slice(0, 300) : '', method: connect ? null : req.method ?? null,
    reason: refusal.reason, status: refusal.status,
  });
}

/**
 * `GET /_job/<credential>/_egress` (docs/gate.md): the asking run's records, or a 404 for a run this gate never saw
 * or let go. Both carry `since`: only the asker can tell whether "never saw" means "made no connection".
 */
function answerEgress(asker: Asker, runs: RunRecords, req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (req.method !== 'GET' || !asker.who) return refuse(res, 405, 'the egress records are read with GET');
  const run = asker.who.run;
  const kept = runs.of(run);
  const policy = { allow: asker.policy.allow.map((p) => p.text), deny: asker.policy.deny.map((p) => p.text) };
  const body = kept.known ? { ...kept.egress, known: true, max_usd: asker.who.maxUsd ?? null } : {
    known: false, evicted: kept.evicted, reason: kept.evicted
      ? 'this gate let the run\'s records go (it keeps the most recently active runs)'
      : 'this gate has no record of the run since it started',
  };
  res.writeHead(kept.known ? 200 : 404, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ run, since: runs.since, policy, ...body }));
}

function destroyOnError(this: Duplex): void {
  this.destroy();
}

// Once a socket leaves the HTTP parser (CONNECT, Upgrade) node no longer listens for its errors: a peer's reset while
// the gate writes its refusal would be an unhandled 'error' and end the process. Listen before anything else.
function quietly(socket: Duplex): void {
  if (!socket.listeners('error').includes(destroyOnError)) socket.on('error', destroyOnError);
}

/** The `Proxy-Authenticate` challenge a 407 carries. */
const challenge = (status: number): Record<string, string> =>
  status === 407 ? { 'proxy-authenticate': 'Basic realm="svc gate"' } : {};

type Handlers = [typeof import('./forward.ts'), typeof import('./tunnel.ts')];

function createGateServer(
  ctx: GateContext, admit: ClientBook, sockets: Set<Socket>, log: Logger, handlers: () => Promise<Handlers>,
  metrics?: GateMetrics,
): Server {
  const server = createServer({ maxHeaderSize: ctx.limits.maxHeaderBytes, noDelay: true });
  server.headersTimeout = Math.min(ctx.limits.idleMs, 30_000);
  server.requestTimeout = 0; // a model request body may stream for a while; idle timeouts bound it instead
  const perPeer = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    const fromPeer = peer === undefined ? 0 : perPeer.get(peer) ?? 0;
    if (sockets.size >= ctx.limits.maxConnections || fromPeer >= ctx.limits.maxConnectionsPerPeer) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    if (peer !== undefined) countWhileOpen(perPeer, peer, socket);
  });
  const onError = (err: unknown, asker: Asker, where: () => void): void => {
    log.error('gate internal error', { error: errorMessage(err) });
    asker.span?.end('error');
    where();
  };
  server.on('request', (req, res) => {
    if (metrics?.answer(req, res)) return;
    const admission = admit(req);
    if (!admission.admitted) {
      req.resume();
      refuse(res, admission.status, admission.reason, challenge(admission.status));
      return ctx.record(refusedRecord(req, admission));
    }
    if (admission.url === '/_egress') return answerEgress(admission.asker, ctx.runs, req, res);
    handlers().then(([{ handleRequest }]) => handleRequest(ctx, admission.asker, admission.url, req, res))
      .catch((err) => onError(err, admission.asker, () => refuse(res, 502, 'internal error')));
  });
  server.on('connect', (req, socket, head) => {
    quietly(socket);
    const admission = admit(req);
    if (!admission.admitted) {
      refuseRaw(socket, admission.status, admission.reason, challenge(admission.status));
      return ctx.record(refusedRecord(req, admission));
    }
    handlers().then(([, { handleConnect }]) => handleConnect(ctx, admission.asker, req, socket, head))
      .catch((err) => onError(err, admission.asker, () => refuseRaw(socket, 502, 'internal error')));
  });
  server.on('upgrade', (_req, socket) => {
    quietly(socket);
    refuseRaw(socket, 403, 'protocol upgrades are not forwarded');
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    quietly(socket);
    const tooBig = err.code === 'HPE_HEADER_OVERFLOW';
    if (socket.writable) refuseRaw(socket, tooBig ? 431 : 400, tooBig ? 'request head too large' : 'malformed request');
    else socket.destroy();
  });
  return server;
}

export async function startGate(options: GateOptions): Promise<Gate> {
  const runs = new RunRecords();
  const log = options.log ?? createLogger('gate');
  const ctx: GateContext = {
    resolve: options.resolve ?? systemResolver,
    connect: options.connect ?? tcpConnect,
    models: new Map((options.models ?? []).map((m) => [m.name, m])),
    ca: options.ca,
    limits: { ...DEFAULT_LIMITS, ...options.limits },
    meter: options.meter ?? null,
    // Tracing off (no endpoint): no spans are made and no traceparent is sent (docs/deploy.md#traces).
    trace: options.trace?.tracer.enabled ? options.trace : null,
    runs,
    record: (whole, asker) => {
      try {
        // Every record's time is when its connection arrived, so its duration is taken here, as it is recorded.
        const r = boundedRecord({ ...whole, ms: Date.now() - Date.parse(whole.time) });
        endConnectionSpan(asker, r);
        runs.add(r);
        // Counted before the record is handed on: a sink that throws must not cost the metrics.
        options.metrics?.recorded(r);
        options.onRecord?.(r);
      } catch {
        // The evidence sink's failure must not break a connection; the writer surfaces its own errors.
      }
    },
  };
  const sockets = new Set<Socket>();
  const servers: Server[] = [];
  let closing = false;
  async function close(): Promise<void> {
    closing = true;
    const closed = servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    for (const socket of sockets) socket.destroy();
    await Promise.all(closed);
  }
  const admit = clientBook(options.clients ?? null, options.policy, ctx.trace);
  let port: number | null = null;
  // Forwarding and tunnelling (node:tls, node:zlib, the usage parsers) load after the listening: a run's gate is bound
  // before its sandbox starts, but nothing connects before the agent runs (docs/bench.md). A connection that comes
  // first is held by the node:http server here, under its head's timeout and caps like any other.
  let handlers: Promise<Handlers> | undefined;
  const load = (): Promise<Handlers> => handlers ??= Promise.all([import('./forward.ts'), import('./tunnel.ts')])
    .catch((err: unknown) => {
      log.error('gate could not load its handlers', { error: errorMessage(err) });
      // Closed once the requests that waited were refused: no connection stays open to a gate that cannot serve it.
      setImmediate(() => void close());
      throw err;
    });
  // A listener handed in gives its listening socket to a server of the gate's own (node's listen(handle)).
  const serve = async (where: number | NetServer): Promise<Server> => {
    const server = createGateServer(ctx, admit, sockets, log, load, options.metrics);
    servers.push(server);
    if (typeof where === 'number') server.listen(where, options.tcpHost ?? '127.0.0.1');
    else server.listen(where);
    await once(server, 'listening');
    return server;
  };
  if (options.tcpPort !== undefined) {
    const address = (await serve(options.tcpPort)).address();
    port = typeof address === 'object' && address ? address.port : null;
  }
  const serveListener = (listener: NetServer): void => {
    if (closing) listener.close();
    else void serve(listener).catch((err: unknown) => log.error('gate could not serve a sandbox\'s port',
      { error: errorMessage(err) }));
  };
  return { port, close, serve: serveListener, load: async () => void await load() };
}
