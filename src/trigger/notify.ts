// Sends a finished job's completion summary to its origin with retries, records the outcome, reports it to the
// Control Plane. Never throws and never changes the job's status (spec rule 5).
import { isJsonObject } from '../untrusted.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TriggerStores } from '../db/trigger-stores.ts';
import { PermanentError, type NotifyConfig, type Piece, type ReplyChannel, type SummaryParts } from './summary.ts';
import { errorMessage, FailedError } from '../errors.ts';
import type { Poster } from './https-post.ts';
import type { NotificationReport } from './control-report.ts';
import type { Logger } from '../log.ts';

export interface NotifierOptions {
  stores: TriggerStores;
  config: NotifyConfig;
  /** Each reply channel's sender, by name (app.ts `REPLIES`). */
  replies: Readonly<Record<string, ReplyChannel>>;
  post: Poster;
  report: (n: NotificationReport) => Promise<void>;
  log: Logger;
  clock: () => number;
  attempts?: number;
  /** First retry delay; each next one is 4× longer. */
  backoffMs?: number;
  /** Aborted at shutdown: retries stop and the summary stays pending for the next start. */
  signal?: AbortSignal;
}

function isPiece(value: unknown): value is Piece {
  if (!isJsonObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && ['own', 'data', 'link'].includes(keys[0]!) && typeof Object.values(value)[0] === 'string';
}

/** The stored parts; a job finished before they were stored (or unreadable ones) sends its whole summary as data. */
export function summaryParts(stored: string | null, plain: string): SummaryParts {
  try {
    const parts: unknown = stored === null ? null : JSON.parse(stored);
    if (Array.isArray(parts) && parts.every((p) => Array.isArray(p) && p.every(isPiece))) return parts as SummaryParts;
  } catch {
    // fall through
  }
  return [[{ data: plain }]];
}

/** A 2xx passes; a 4xx other than 408/429 will not get better by retrying; anything else may. */
function checkStatus(status: number, what: string): void {
  if (status >= 200 && status < 300) return;
  const message = `${what} answered HTTP ${status}`;
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw new PermanentError(message);
  throw new FailedError(message);
}

export function createNotifier(opts: NotifierOptions): (jobId: string) => Promise<void> {
  const attempts = opts.attempts ?? 4;
  const backoffMs = opts.backoffMs ?? 1000;
  const inFlight = new Set<string>();

  async function deliver(jobId: string): Promise<void> {
    const job = opts.stores.jobs.get(jobId);
    const target = opts.stores.replies.get(jobId);
    if (!job || !target || target.notify_status !== null || !job.summary) return;
    const { channel } = target;
    const parts = summaryParts(job.summary_parts, job.summary);
    const reply = Object.hasOwn(opts.replies, channel) ? opts.replies[channel] : undefined;
    const delivery = reply
      ? reply.prepare(target.target, parts, opts.config)
      : `origin ${channel} takes no completion summary`;
    if (typeof delivery === 'string') {
      opts.log.info('completion summary not sent', { job_id: jobId, channel, reason: delivery });
      opts.stores.replies.markNotified(jobId, 'skipped', opts.clock());
      return;
    }
    let error: string | null = null;
    let tried = 0;
    for (; tried < attempts; ) {
      tried++;
      try {
        const answer = await opts.post(delivery.url, delivery.headers, delivery.body);
        checkStatus(answer.status, delivery.what);
        delivery.check?.(answer.text);
        error = null;
        break;
      } catch (err) {
        error = errorMessage(err);
        opts.log.warn('completion summary failed', {
          job_id: jobId, channel, host: delivery.url.host, attempt: tried, error,
        });
        if (err instanceof PermanentError || tried >= attempts) break;
        try {
          await sleep(backoffMs * 4 ** (tried - 1), undefined, opts.signal ? { signal: opts.signal } : {});
        } catch {
          return; // shutting down: left pending, sent on the next start
        }
      }
    }
    const status = error === null ? 'sent' : 'failed';
    opts.stores.replies.markNotified(jobId, status, opts.clock());
    if (status === 'failed') {
      opts.log.error('completion summary gave up', { job_id: jobId, channel, attempts: tried, error });
    }
    await opts.report({
      job_id: jobId,
      source: job.run_source,
      run: job.run_id,
      origin: job.origin,
      channel,
      target: delivery.url.host,
      status,
      attempts: tried,
      error,
      message: job.summary,
    });
  }

  return async function notifyJob(jobId: string): Promise<void> {
    if (inFlight.has(jobId)) return;
    inFlight.add(jobId);
    try {
      await deliver(jobId);
    } catch (err) {
      opts.log.error('notifier error', { job_id: jobId, error: errorMessage(err) });
    } finally {
      inFlight.delete(jobId);
    }
  };
}
