// Sends a finished job's completion summary to its origin with retries, records the outcome, reports it to the
// Control Plane. Never throws and never changes the job's status (spec rule 5).
import { isJsonObject } from '../untrusted.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TriggerStores } from '../db/trigger-stores.ts';
import { PermanentError, type NotifyConfig, type Piece, type ReplyChannel, type SummaryParts } from './summary.ts';
import type { Poster } from './https-post.ts';
import type { NotificationReport } from './control-report.ts';
import type { Logger } from '../log.ts';
import { errorMessage } from '../errors.ts';

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

export function createNotifier(opts: NotifierOptions): (jobId: string) => Promise<void> {
  const attempts = opts.attempts ?? 4;
  const backoffMs = opts.backoffMs ?? 1000;
  const inFlight = new Set<string>();

  async function deliver(jobId: string): Promise<void> {
    const job = opts.stores.jobs.get(jobId);
    const target = opts.stores.replies.get(jobId);
    if (!job || !target || target.notify_status !== null || !job.summary) return;
    const parts = summaryParts(job.summary_parts, job.summary);
    const reply = Object.hasOwn(opts.replies, target.channel) ? opts.replies[target.channel] : undefined;
    const delivery = reply
      ? reply.prepare(target.target, parts, opts.config)
      : `origin ${target.channel} takes no completion summary`;
    if (typeof delivery === 'string') {
      opts.log.info('completion summary not sent', { job_id: jobId, channel: target.channel, reason: delivery });
      opts.stores.replies.markNotified(jobId, 'skipped', opts.clock());
      return;
    }
    let error: string | null = null;
    let tried = 0;
    for (; tried < attempts; ) {
      tried++;
      try {
        await delivery.send(opts.post);
        error = null;
        break;
      } catch (err) {
        error = errorMessage(err);
        opts.log.warn('completion summary failed', {
          job_id: jobId, channel: delivery.channel, host: delivery.url.host, attempt: tried, error,
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
      const fields = { job_id: jobId, channel: delivery.channel, attempts: tried, error };
      opts.log.error('completion summary gave up', fields);
    }
    await opts.report({
      job_id: jobId,
      source: job.run_source,
      run: job.run_id,
      origin: job.origin,
      channel: delivery.channel,
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
