// A delivery's span continues a valid `traceparent` header (anything else starts a new trace); the job's span runs
// from its queueing to its end and is the parent its run continues. Its ids are stored with the job, so a job a
// restart re-attached still ends its span.
import { formatTraceparent, newSpanId, newTraceId, OpenSpan, parseTraceparent, type Tracer } from '../trace.ts';
import type { IncomingMessage } from 'node:http';
import type { JobRow } from '../db/trigger-jobs-store.ts';

export type Delivery = ReturnType<typeof startDelivery>;

/** With no exporter nothing is timed and no id is made (~8 % of a delivery's CPU): `traceparent` is handed on as is. */
export function startDelivery(tracer: Tracer, req: IncomingMessage, origin: string, repo: string) {
  const parent = req.headers.traceparent === undefined ? null : parseTraceparent(req.headers.traceparent);
  if (!tracer.enabled) {
    return { span: null, job: parent ? { traceparent: formatTraceparent(parent), parent: null } : undefined };
  }
  const span = new OpenSpan(tracer, 'svc.delivery', parent, {
    kind: 'server', attributes: {
      'http.request.method': req.method ?? 'POST', 'http.route': `/${origin}`, 'svc.origin': origin, 'svc.repo': repo,
    },
  });
  const job = formatTraceparent({ traceId: span.context.traceId, spanId: newSpanId() });
  return { span, job: { traceparent: job, parent: span.context.spanId } };
}

/** The job's own, or a new one made here: a pod's run container and its signer must name the same trace id. */
export function launchTraceparent(job: JobRow): string {
  return job.traceparent ?? formatTraceparent({ traceId: newTraceId(), spanId: newSpanId() });
}

/** A job queued before trigger migration 11 has no span. */
export function endJobSpan(tracer: Tracer, job: JobRow, status: string, endMs: number, run: string | null): void {
  const own = parseTraceparent(job.traceparent);
  if (!own || !job.trace_parent) return;
  new OpenSpan(tracer, 'svc.job', { traceId: own.traceId, spanId: job.trace_parent }, {
    kind: 'consumer', spanId: own.spanId, startMs: job.created_at,
    attributes: { 'svc.job_id': job.id, 'svc.origin': job.origin, 'svc.repo': job.repo, 'svc.run': run },
  }).end(status === 'succeeded' ? 'ok' : 'error', { 'svc.job.status': status }, endMs);
}
