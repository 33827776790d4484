// A delivery's and its job's spans (src/trace.ts): the delivery's span is the request that queued the job, continuing
// a valid `traceparent` header (untrusted: anything else starts a new trace and is kept nowhere); the job's span runs
// from its queueing to its end and is the parent its run continues (SVC_TRACEPARENT). Its ids are stored with the job
// (trigger migration 11), so a job a restart re-attached still ends its span.
import { formatTraceparent, newSpanId, newTraceId, OpenSpan, parseTraceparent, type Tracer } from '../trace.ts';
import type { IncomingMessage } from 'node:http';
import type { JobRow } from '../db/trigger-jobs-store.ts';

/**
 * What a job keeps of its trace: its own span as a `traceparent`, and its parent's (the delivery's) span id, null when
 * the traceparent is the caller's own, passed on by a server that records no spans.
 */
export interface JobTrace {
  traceparent: string;
  parent: string | null;
}

export interface Delivery {
  span: OpenSpan | null;
  job: JobTrace | undefined;
}

/**
 * With no exporter nothing is timed and no id is made (three random ids were ~8 % of a webhook delivery's CPU): a
 * valid incoming `traceparent` is handed on to the job's run as it came, else the job has none and its run gets one
 * at launch (`launchTraceparent`).
 */
export function startDelivery(tracer: Tracer, req: IncomingMessage, origin: string, repo: string): Delivery {
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

/**
 * The `traceparent` a job's run continues: the job's own, or (a job queued with no trace) a new one, made here rather
 * than by the run because a pod's run container and its signer must name the same trace id (src/pod/sign.ts).
 */
export function launchTraceparent(job: JobRow): string {
  return job.traceparent ?? formatTraceparent({ traceId: newTraceId(), spanId: newSpanId() });
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
