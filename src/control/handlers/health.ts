// Liveness and readiness: /health answers while the process runs; /ready also proves the DB answers a query.
import { HttpError } from '../../http/http-error.ts';
import type { Handler } from '../../http/pipeline.ts';
import { JSON_HEADERS, type Reply } from '../../http/respond.ts';
import type { ControlDeps } from '../deps.ts';
import { errorMessage } from '../../errors.ts';
import { metricsReply } from '../../http/metrics.ts';

// Pre-encoded: /health is the hottest, cheapest route (DESIGN §7 bar: ≥ 0.85 × plain node:http).
const OK: Reply = {
  status: 200,
  headers: JSON_HEADERS,
  body: '{"status":"ok"}',
};

export const getHealth: Handler<ControlDeps> = () => OK;

export const getReady: Handler<ControlDeps> = (ctx) => {
  try {
    ctx.deps.stores.runs.ping();
  } catch (err) {
    ctx.deps.log.error('readiness check failed', { error: errorMessage(err) });
    throw new HttpError('unavailable', 'Database is not available');
  }
  return OK;
};

export const getMetrics: Handler<ControlDeps> = (ctx) => metricsReply(ctx.deps.metrics.registry);
