// Tells the Control Plane (POST /v1/ingest) about each completion summary, best effort, and which repositories this
// server serves, until accepted.
import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { NotificationInput } from '../db/notifications-store.ts';

// `target` is a host only: a response_url's path is a capability and never leaves this process.
export type NotificationReport = Omit<NotificationInput, 'created_at' | 'updated_at'> & { message: string };

interface ControlReportOptions {
  controlUrl: string | undefined;
  controlToken: string | undefined;
  source: string;
  log: Pick<Logger, 'info' | 'warn'>;
}

/** POST /v1/ingest with this server's token; the reply body is drained, never read. */
async function postIngest(opts: ControlReportOptions, body: string, signal: AbortSignal): Promise<Response> {
  const res = await fetch(`${opts.controlUrl!.replace(/\/+$/, '')}/v1/ingest`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(opts.controlToken ? { authorization: `Bearer ${opts.controlToken}` } : {}),
    },
    body,
    signal,
    // Never followed with the token or the body: a 3xx is an answer that is not ok (DESIGN §7a).
    redirect: 'manual',
  });
  await res.arrayBuffer();
  return res;
}

export function createControlReporter(opts: ControlReportOptions): (n: NotificationReport) => Promise<void> {
  return async (notification) => {
    if (!opts.controlUrl) return;
    const fields = { job_id: notification.job_id };
    try {
      const body = { source: opts.source, runs: [], events: [], artifacts: [], notifications: [notification] };
      const res = await postIngest(opts, JSON.stringify(body), AbortSignal.timeout(5_000));
      if (!res.ok) opts.log.warn('Control Plane refused the notification report', { ...fields, status: res.status });
    } catch (err) {
      opts.log.warn('Control Plane unreachable for the notification report', { ...fields, error: errorMessage(err) });
    }
  };
}

const SERVED_RETRY_MS = [1_000, 5_000, 30_000, 60_000, 300_000];

/** The served repositories, retried until one report is accepted (the Control Plane keeps them) or `signal` aborts. */
export async function reportServedRepos(names: readonly string[], opts: ControlReportOptions & {
  signal: AbortSignal;
  /** Waits between attempts; the last one repeats. */
  retryMs?: readonly number[];
}): Promise<void> {
  if (!opts.controlUrl) return;
  const body = JSON.stringify({ source: opts.source, served_repos: names.map((name) => ({ name })) });
  const waits = opts.retryMs ?? SERVED_RETRY_MS;
  for (let attempt = 0; !opts.signal.aborted; attempt++) {
    let why: Record<string, unknown>;
    try {
      const res = await postIngest(opts, body, AbortSignal.any([opts.signal, AbortSignal.timeout(5_000)]));
      if (res.ok) {
        opts.log.info('served repositories reported to the Control Plane', { repos: names.length });
        return;
      }
      why = { status: res.status };
    } catch (err) {
      if (opts.signal.aborted) return;
      why = { error: errorMessage(err) };
    }
    const wait = waits[Math.min(attempt, waits.length - 1)] ?? 300_000;
    opts.log.warn('Control Plane did not take the served repositories; retrying', { ...why, retry_ms: wait });
    try {
      await sleep(wait, undefined, { signal: opts.signal });
    } catch {
      return;
    }
  }
}
