// Sends a finished job's completion summary to its origin with retries, records the outcome and reports it to the
// Control Plane; while the job runs, its progress the same way. Never throws, never changes the job (spec rule 5).
import { setTimeout as sleep } from 'node:timers/promises';
import { hash } from 'node:crypto';
import type { TriggerStores } from '../db/trigger-stores.ts';
import {
  buildProgressParts, PermanentError, plainSummary,
  type Delivery, type NotifyConfig, type Piece, type Progress, type ReplyChannel, type SummaryParts,
} from './summary.ts';
import { isJsonObject } from '../json-value.ts';
import { tryParseJson } from '../untrusted.ts';
import { errorMessage, FailedError } from '../errors.ts';
import type { Poster } from './https-post.ts';
import type { NotificationReport } from './control-report.ts';
import type { Logger } from '../log.ts';
import { inTurn } from './queue.ts';
import { refusedForNow, untilWritten } from '../db/open.ts';

interface NotifierOptions {
  stores: TriggerStores;
  config: NotifyConfig;
  /** Each reply channel's sender, by the name the sources store with a job's reply target. */
  replies: Readonly<Partial<Record<string, ReplyChannel>>>;
  post: Poster;
  report: (n: NotificationReport) => Promise<void>;
  log: Logger;
  clock: () => number;
  /** First retry delay; each next one is 4× longer. */
  backoffMs?: number;
  /** Aborted at shutdown: retries stop, the summary stays pending for the next start. */
  signal?: AbortSignal;
  publicUrl?: string | undefined;
}

function isPiece(value: unknown): value is Piece {
  if (!isJsonObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && ['own', 'data', 'link'].includes(keys[0]!) && typeof Object.values(value)[0] === 'string';
}

/** The stored parts; a job finished before they were stored (or unreadable ones: a row is data that outlives the
 * code that wrote it) sends its whole summary as data, so one bad row never blocks its summary for good. */
function storedParts(stored: string | null, plain: string): SummaryParts {
  const parts = stored === null ? null : tryParseJson(stored);
  if (Array.isArray(parts) && parts.every((p) => Array.isArray(p) && p.every(isPiece))) return parts as SummaryParts;
  return [[{ data: plain }]];
}

/** A 2xx passes; a 4xx other than 408/429 will not get better by retrying; anything else may. */
function checkStatus(status: number, what: string): void {
  if (status >= 200 && status < 300) return;
  const message = `${what} answered HTTP ${status}`;
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw new PermanentError(message);
  throw new FailedError(message);
}

/** Before a summary sent again after a restart that may have cut off its outcome's record, not its delivery. */
const RESENT = 'svc restarted while sending this summary: it may have arrived once already';

const ATTEMPTS = 4;
/** The longest a vendor's `Retry-After` holds a retry back (its rate limits ask for seconds, up to a minute). */
const MAX_RETRY_AFTER_MS = 120_000;

type Sent = { error: string | null; tried: number; aborted?: true };

export function createNotifier(opts: NotifierOptions) {
  const backoffMs = opts.backoffMs ?? 1000;
  // One message of a job at a time, in order: the progress comment a later edit PATCHes must exist first.
  const queues = new Map<string, Promise<unknown>>();
  const signal = opts.signal ?? new AbortController().signal;
  /**
   * Question stamps the database refused for now (busy), by job: written before the job's next message and before an
   * answer is matched (`writeStamps`), so a reply to an earlier question never answers a newer one.
   */
  const unstamped = new Map<string, number>();

  function writeStamps(): void {
    for (const [jobId, askedAt] of unstamped) {
      opts.stores.replies.patchTarget(jobId, { asked: null, question_message: null, asked_at: askedAt });
      unstamped.delete(jobId);
    }
  }

  /** A write of the job's turn, tried again while the database refuses it (logged once); false on shutdown. */
  function written(jobId: string, write: () => void): Promise<boolean> {
    let told = false;
    return untilWritten(opts.stores.db, write, signal, (err) => {
      if (!told) opts.log.warn('notifier could not write; trying again', { job_id: jobId, error: errorMessage(err) });
      told = true;
    });
  }

  function jobTurn<T>(jobId: string, work: () => Promise<T>, fallback: T): Promise<T> {
    return inTurn(queues, jobId, () => work().catch((err: unknown) => {
      opts.log.error('notifier error', { job_id: jobId, error: errorMessage(err) });
      return fallback;
    }));
  }

  /** A stored channel name is a row's text: only the table's own keys name a channel. */
  function channelOf(name: string): ReplyChannel | undefined {
    return Object.hasOwn(opts.replies, name) ? opts.replies[name] : undefined;
  }

  /** Sends with the retries (`error` null when sent); keeps what the answer says to remember. */
  async function send(jobId: string, channel: string, delivery: Delivery): Promise<Sent> {
    for (let tried = 1; ; tried++) {
      // A rate limit's own wait: retrying sooner is refused again, and four refusals would lose the message.
      let asked = 0;
      try {
        const answer = await opts.post(delivery.url, delivery.headers, delivery.body, delivery.method);
        if (answer.status === 429 || answer.status === 503) asked = answer.retryAfterMs ?? 0;
        checkStatus(answer.status, delivery.what);
        delivery.check?.(answer.text);
        const keep = delivery.remember?.(answer.text);
        // Sent: a write the database refuses waits, never sends it again.
        if (keep && !await written(jobId, () => opts.stores.replies.patchTarget(jobId, keep))) {
          return { error: null, tried, aborted: true };
        }
        return { error: null, tried };
      } catch (err) {
        const error = errorMessage(err);
        opts.log.warn('reply failed', { job_id: jobId, channel, host: delivery.url.host, attempt: tried, error });
        if (err instanceof PermanentError || tried >= ATTEMPTS) return { error, tried };
        try {
          const wait = Math.max(backoffMs * 4 ** (tried - 1), Math.min(asked, MAX_RETRY_AFTER_MS));
          await sleep(wait, undefined, opts.signal ? { signal: opts.signal } : {});
        } catch {
          return { error, tried, aborted: true };
        }
      }
    }
  }

  /** One message to the job's origin while its summary has not gone (the summary's outcome recorded). */
  async function tell(
    jobId: string, kind: 'summary' | 'progress' | 'question' | 'note', given?: SummaryParts,
  ): Promise<boolean> {
    const job = opts.stores.jobs.get(jobId);
    const target = opts.stores.replies.get(jobId);
    if (!job || !target || target.notify_status !== null || (kind === 'summary' && !job.summary)) return false;
    const { channel } = target;
    const parts = given ?? storedParts(job.summary_parts, job.summary ?? '');
    const reply = channelOf(channel);
    let delivery = !reply ? `origin ${channel} takes no messages`
      : kind === 'note' && reply.note ? reply.note(target.target, parts, opts.config)
      : kind === 'question' && reply.ask ? reply.ask(target.target, parts, opts.config, opts.clock())
      : reply.prepare(target.target, parts, opts.config, opts.clock());
    if (kind === 'summary' && reply && typeof delivery !== 'string') {
      // Recorded before it goes (while the database refuses the mark, the summary waits): a server killed after the
      // vendor took it, before its outcome was written, finds the mark on its restart. svc sends the vendors no
      // idempotency key (trackera's commentCreate may take a client-chosen id; not used), so the summary goes once
      // more saying it may be a repeat; a PATCH only sets the text of the one comment it edits (GitHub's), and goes
      // again as it was.
      const sending = { summary_sending: true };
      if (target.target.summary_sending !== true) {
        if (!await written(jobId, () => opts.stores.replies.patchTarget(jobId, sending))) return false;
      } else if (delivery.method !== 'PATCH') {
        delivery = reply.prepare(target.target, [[{ own: RESENT }], ...parts], opts.config, opts.clock());
      }
    }
    if (typeof delivery === 'string') {
      opts.log.info(`${kind === 'summary' ? 'completion summary' : kind} not sent`, { job_id: jobId, channel,
        reason: delivery });
      const skipped = () => opts.stores.replies.markNotified(jobId, 'skipped', opts.clock());
      if (kind === 'summary') await written(jobId, skipped);
      return false;
    }
    let sent = await send(jobId, channel, delivery);
    if (kind === 'question' && sent.error !== null && !sent.aborted && reply?.ask) {
      // The post that keeps a thread was refused (a bot not in a private channel): the question still goes out.
      const plain = reply.prepare(opts.stores.replies.get(jobId)?.target ?? target.target, parts, opts.config,
        opts.clock());
      if (typeof plain !== 'string') sent = await send(jobId, channel, plain);
    }
    if (kind === 'summary') {
      const status = sent.error === null ? 'sent' : 'failed';
      // Shutting down: left pending, sent on the next start.
      if (sent.aborted || !await written(jobId, () => opts.stores.replies.markNotified(jobId, status, opts.clock()))) {
        return false;
      }
      const gaveUp = { job_id: jobId, channel, attempts: sent.tried, error: sent.error };
      if (sent.error !== null) opts.log.error('completion summary gave up', gaveUp);
    }
    await opts.report({
      job_id: job.id, source: job.run_source, run: job.run_id, origin: job.origin, channel,
      target: delivery.url.host, status: sent.error === null ? 'sent' : 'failed', attempts: sent.tried,
      error: sent.error, message: kind === 'summary' ? job.summary! : plainSummary(parts),
    });
    return sent.error === null;
  }

  const notifyJob = (jobId: string): Promise<void> => jobTurn(jobId, async () => {
    await tell(jobId, 'summary');
  }, undefined);
  return Object.assign(notifyJob, {
    /** The run started (only channels that keep a progress message), asks a question, or was answered. */
    progress(jobId: string, progress: Progress): Promise<void> {
      // The question posted is kept (as a digest) with the reply target, so a restart does not post it again.
      const asked = progress.step === 'waiting' ? hash('sha256', progress.question, 'hex') : null;
      const current = opts.stores.replies.get(jobId);
      if (asked !== null && current && asked !== current.target.asked) {
        // When it was asked, stamped as the run asks it (not when its post's turn comes, behind a post still being
        // sent), whether or not the post goes: a comment written before it was meant for an earlier question, or
        // none, and never answers this one (answers.ts); the earlier question's thread answers nothing more. A stamp
        // the database refuses waits in `unstamped`, written before anything that reads it.
        unstamped.set(jobId, opts.clock());
        try {
          writeStamps();
        } catch (err) {
          if (!refusedForNow(opts.stores.db, err)) throw err;
          opts.log.warn('question stamp waits for the database', { job_id: jobId, error: errorMessage(err) });
        }
      }
      return jobTurn(jobId, async () => {
        if (!await written(jobId, writeStamps)) return;
        const job = opts.stores.jobs.get(jobId);
        const target = opts.stores.replies.get(jobId);
        if (!job?.run_source || !job.run_id || !target) return;
        if (asked !== null && asked === target.target.asked) {
          opts.log.info('question already posted', { job_id: jobId });
          return;
        }
        if (asked !== null || target.target.asked !== undefined) {
          // The old question's thread answers nothing more (a late reply there must not answer the next question).
          const ended = { asked: null, question_message: null };
          if (!await written(jobId, () => opts.stores.replies.patchTarget(jobId, ended))) return;
        }
        if (progress.step === 'resumed') return;
        // Every origin hears a question; only one that keeps a progress message hears the rest.
        if (asked === null && !channelOf(target.channel)?.progress) return;
        const run = { source: job.run_source, run: job.run_id };
        const parts = buildProgressParts(jobId, run, progress, opts.publicUrl);
        if (await tell(jobId, asked === null ? 'progress' : 'question', parts) && asked !== null) {
          await written(jobId, () => opts.stores.replies.patchTarget(jobId, { asked }));
        }
      }, undefined);
    },
    /** A message of its own to the job's origin (an answer refused there); true once it was sent. */
    note(jobId: string, parts: SummaryParts): Promise<boolean> {
      return jobTurn(jobId, () => tell(jobId, 'note', parts), false);
    },
    /** Writes the question stamps the database refused so far; throws while it still refuses them (answers.ts). */
    writeStamps,
  });
}
