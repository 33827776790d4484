// Tells the Control Plane about each completion summary (POST /v1/ingest `notifications`), best effort only.

export interface NotificationReport {
  job_id: string;
  source: string | null;
  run: string | null;
  origin: string;
  channel: string;
  /** Host only: a response_url's path is a capability and never leaves this process. */
  target: string;
  status: 'sent' | 'failed';
  attempts: number;
  error: string | null;
  message: string;
}

export interface ControlReportOptions {
  controlUrl: string | undefined;
  controlToken: string | undefined;
  source: string;
  fetch: typeof fetch;
  log: { warn(msg: string, fields?: Record<string, unknown>): void };
  timeoutMs?: number;
}

export function createControlReporter(opts: ControlReportOptions): (n: NotificationReport) => Promise<void> {
  return async (notification) => {
    if (!opts.controlUrl) return;
    try {
      const res = await opts.fetch(`${opts.controlUrl.replace(/\/+$/, '')}/v1/ingest`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(opts.controlToken ? { authorization: `Bearer ${opts.controlToken}` } : {}),
        },
        body: JSON.stringify({ source: opts.source, runs: [], events: [], artifacts: [], notifications: [notification] }),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 5_000),
      });
      await res.arrayBuffer();
      if (!res.ok) opts.log.warn('Control Plane refused the notification report', { job_id: notification.job_id, status: res.status });
    } catch (err) {
      opts.log.warn('Control Plane unreachable for the notification report', {
        job_id: notification.job_id,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  };
}
