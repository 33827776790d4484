// Tells the Control Plane (POST /v1/ingest) about each completion summary, best effort, and which repositories this
// server serves, until accepted.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log.ts';
import type { NotificationInput } from '../db/notifications-store.ts';
import { causeOf, ControlApiError, createControlClient } from '../client/client.ts';
import type { IngestBatch } from '../client/types.ts';

// `target` is a host only: a response_url's path is a capability and never leaves this process.
export type NotificationReport = Omit<NotificationInput, 'created_at' | 'updated_at'> & { message: string };

interface ControlReportOptions {
  controlUrl: string | undefined;
  controlToken: string | undefined;
  source: string;
  log: Pick<Logger, 'info' | 'warn'>;
}

/** POST /v1/ingest through the SDK's client: this server's token, never a redirect followed (DESIGN §7a). */
function postIngest(opts: ControlReportOptions, batch: IngestBatch, signal?: AbortSignal): Promise<unknown> {
  const client = createControlClient({ url: opts.controlUrl!, token: opts.controlToken, timeoutMs: 5_000 });
  return client.ingest(batch, signal);
}

/** A refusal's HTTP status (a 3xx included), or null for no answer at all. */
function refusedWith(err: unknown): number | null {
  return err instanceof ControlApiError && err.status !== 0 ? err.status : null;
}

export function createControlReporter(opts: ControlReportOptions): (n: NotificationReport) => Promise<void> {
  return async (notification) => {
    if (!opts.controlUrl) return;
    const fields = { job_id: notification.job_id };
    try {
      const batch = { source: opts.source, runs: [], events: [], artifacts: [], notifications: [notification] };
      await postIngest(opts, batch);
    } catch (err) {
      const status = refusedWith(err);
      if (status !== null) opts.log.warn('Control Plane refused the notification report', { ...fields, status });
      else opts.log.warn('Control Plane unreachable for the notification report', { ...fields, error: causeOf(err) });
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
  const batch = { source: opts.source, served_repos: names.map((name) => ({ name })) };
  const waits = opts.retryMs ?? SERVED_RETRY_MS;
  for (let attempt = 0; !opts.signal.aborted; attempt++) {
    let why: Record<string, unknown>;
    try {
      await postIngest(opts, batch, opts.signal);
      opts.log.info('served repositories reported to the Control Plane', { repos: names.length });
      return;
    } catch (err) {
      if (opts.signal.aborted) return;
      const status = refusedWith(err);
      why = status !== null ? { status } : { error: causeOf(err) };
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
