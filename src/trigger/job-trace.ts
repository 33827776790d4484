// A delivery's and its job's spans (src/trace.ts): the delivery's span is the request that queued the job, continuing
// a valid `traceparent` header (untrusted: anything else starts a new trace and is kept nowhere); the job's span runs
// from its queueing to its end and is the parent its run continues (SVC_TRACEPARENT). Its ids are stored with the job
// (trigger migration 11), so a job a restart re-attached still ends its span.
import { formatTraceparent, newSpanId, OpenSpan, parseTraceparent, type Attrs, type Tracer } from '../trace.ts';
import type { IncomingMessage } from 'node:http';
import type { JobRow } from '../db/trigger-jobs-store.ts';

/** What a job keeps of its trace: its own span as a `traceparent`, and its parent's (the delivery's) span id. */
export interface JobTrace {
  traceparent: string;
  parent: string;
}

export interface Delivery {
  span: OpenSpan;
  job: JobTrace;
}

export function startDelivery(tracer: Tracer, req: IncomingMessage, attrs: Attrs): Delivery {
  const span = new OpenSpan(tracer, 'svc.delivery', parseTraceparent(req.headers.traceparent), {
    kind: 'server', attributes: { 'http.request.method': req.method ?? 'POST', ...attrs },
  });
  const job = formatTraceparent({ traceId: span.context.traceId, spanId: newSpanId() });
  return { span, job: { traceparent: job, parent: span.context.spanId } };
}

/** Records the job's span once the job has ended (a job queued before migration 11 has none). */
export function endJobSpan(tracer: Tracer, job: JobRow, status: string, endMs: number, run: string | null): void {
  const own = parseTraceparent(job.traceparent);
  if (!own || !job.trace_parent) return;
  new OpenSpan(tracer, 'svc.job', { traceId: own.traceId, spanId: job.trace_parent }, {
    kind: 'consumer', spanId: own.spanId, startMs: job.created_at,
    attributes: { 'svc.job_id': job.id, 'svc.origin': job.origin, 'svc.repo': job.repo, 'svc.run': run },
  }).end(status === 'succeeded' ? 'ok' : 'error', { 'svc.job.status': status }, endMs);
}
