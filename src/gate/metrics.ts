// `svc gate serve`'s own series and access log (docs/deploy.md "Metrics"), and GET /metrics for the token's holder.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import type { EgressRecord } from './evidence.ts';
import type { Logger } from '../log.ts';
import { BadSettingError } from '../errors.ts';
import { settingFile } from '../settings-registry.ts';
import { safeEqual } from '../http/guards.ts';
import { sendReply, type Reply } from '../http/respond.ts';
import {
  MetricsRegistry, createModelUsage, createRequestMetrics, metricsReply, type RequestMetrics,
} from '../http/metrics.ts';

export type GateMetrics = ReturnType<typeof createGateMetrics>;

/** The token's first line; refused when short or equal to the gate's credential secret. */
export function readMetricsToken(path: string, gateSecret: Buffer): string {
  const setting = 'SVC_GATE_METRICS_TOKEN_FILE';
  const token = settingFile(setting, path).split(/\r?\n/, 1)[0]!.trim();
  if (token.length < 16) throw new BadSettingError(`${setting}: the token must be at least 16 characters`);
  if (safeEqual(token, gateSecret.toString('utf8'))) {
    throw new BadSettingError(`${setting}: the token must differ from SVC_GATE_SECRET_FILE's secret`);
  }
  return token;
}

// Route labels are a connection's kind or this route: a credential in a path never appears.
const METRICS_ROUTE = '/metrics';

/** A null `token` serves no /metrics (the path is then an ordinary proxy request); `accessLog`: SVC_ACCESS_LOG=1. */
export function createGateMetrics(token: string | null, accessLog: Logger | null) {
  const registry = new MetricsRegistry();
  const requests: RequestMetrics = createRequestMetrics(registry);
  const connections = registry.counter('svc_gate_connections_total', 'Client requests and tunnels the gate decided ' +
    'or refused, by kind (connect, http, model, traces) and decision (allowed, denied)', ['kind', 'decision']);
  const bytes = registry.counter('svc_gate_bytes_total', 'Bytes the gate carried to (up) and from (down) ' +
    'destinations', ['direction']);
  bytes.inc(['up'], 0);
  bytes.inc(['down'], 0);
  const countModelUsage = createModelUsage(registry);
  const served = (method: string, route: string, status: number, seconds: number, size: number, peer: string) => {
    requests.observe(route, method, status, seconds);
    accessLog?.info('request', {
      method, route, status, duration_ms: Math.round(seconds * 1e6) / 1e3, bytes: size, request_id: randomUUID(), peer,
    });
  };
  return {
    recorded(r: EgressRecord): void {
      const route = r.kind;
      const method = r.method ?? 'CONNECT';
      connections.inc([r.kind, r.decision]);
      bytes.inc(['up'], r.bytesUp);
      bytes.inc(['down'], r.bytesDown);
      const m = r.metered;
      // The cost as the budgets count it (a call of unknown usage at its bound); tokens only as the API counted them.
      if (m) {
        const tokens = m.unknown === null ? m.tokens_in + m.tokens_out : 0;
        countModelUsage(r.model ?? 'other', m.model ?? 'other', tokens, m.usd ?? 0);
      }
      // A record names the job its client spoke for, not the client's address: `peer` is the job's id.
      served(method, route, r.status ?? 0, r.ms / 1000, r.bytesUp + r.bytesDown, r.job ? `job ${r.job}` : '');
    },
    /** Whether it answered the request (GET /metrics), else it is the proxy's. */
    answer(req: IncomingMessage, res: ServerResponse): boolean {
      if (token === null || req.url !== METRICS_ROUTE) return false;
      const started = performance.now();
      req.resume();
      const presented = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
      const plain = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' };
      const reply: Reply = req.method !== 'GET' && req.method !== 'HEAD'
        ? { status: 405, headers: { ...plain, allow: 'GET, HEAD' }, body: 'svc gate: /metrics is read with GET\n' }
        : presented === undefined || !safeEqual(presented, token)
          ? { status: 401, headers: { ...plain, 'www-authenticate': 'Bearer' },
            body: 'svc gate: missing or wrong bearer token\n' }
          : metricsReply(registry);
      sendReply(res, reply, req.method === 'HEAD');
      const seconds = (performance.now() - started) / 1000;
      const size = Buffer.byteLength(reply.body as string);
      served(req.method ?? '', METRICS_ROUTE, reply.status, seconds, size, req.socket.remoteAddress ?? '');
      return true;
    },
  };
}
