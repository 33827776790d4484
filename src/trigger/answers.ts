// Answers to a blocked run from where its job was asked (a chat command, an issue comment), as the route read them:
// find the job on that thread, dedupe, hand the text to the run (the executor's `answer`), audit, say what to reply.
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { JobExecutor } from './executor.ts';
import type { Logger } from '../log.ts';
import type { RepoRouter } from './served-repos.ts';
import { stripLeadingHyphens } from '../webhook-sources.ts';
import { MAX_ANSWER_BYTES } from '../engine/answers.ts';
import { json, type Reply } from '../http/respond.ts';
import { ANSWER_COMMAND, data, type Progress, type SummaryParts } from './summary.ts';
import { ridingOut } from '../db/open.ts';
import { errorMessage } from '../errors.ts';

export interface AnswerRequest {
  origin: string;
  /** The conversation the job was asked in, as its reply target's `thread` names it (`github:acme/api#12`). */
  thread: string;
  /** A job id the sender named, else any job of the thread. */
  jobId?: string | undefined;
  /** The question message it replies in the thread of (chata). */
  replyTo?: string;
  text: string;
  who: string;
  place: string;
  /** Why this sender may not answer this job, or null. */
  refusal: (job: JobRow) => string | null;
  /**
   * Whether the vendor's API says the sender may answer here (true), else why not: asked only for an answer that is
   * no copy of one handled and finds a job to answer, so a redelivery or a stray comment costs no API call.
   */
  standing?: () => Promise<true | string>;
  /** When the vendor says it was written (ms; null: unsaid), where signed deliveries carry no time of their own. */
  writtenAt?: number | null;
  keys: readonly string[];
}

type AnswerOutcome =
  | { kind: 'answered'; jobId: string; run: string }
  | { kind: 'duplicate'; jobId: string }
  /** `elsewhere`: named from a thread it was not asked in, so no reply goes to the job's own thread. */
  | { kind: 'refused'; jobId: string; reason: string; elsewhere?: true }
  | { kind: 'no_job'; reason: string };

export type AnswerDesk = ReturnType<typeof createAnswerDesk>;

export interface AnswerDeskOptions {
  stores: TriggerStores;
  executor: Pick<JobExecutor, 'answer'>;
  clock: () => number;
  log: Logger;
  /** notify.ts `progress`, `note` and `writeStamps`. */
  progress: (jobId: string, progress: Progress) => Promise<void>;
  note: (jobId: string, parts: SummaryParts) => Promise<boolean>;
  writeStamps: () => void;
}

/** A `/svc answer [<job id>] <text>` command or comment, or null. */
export function answerCommand(text: string): { jobId: string | undefined; text: string } | null {
  const match = /^\/svc[ \t]+answer(?:[ \t\r\n]+([\s\S]*))?$/i.exec(text.trim());
  if (!match) return null;
  const named = /^(j[0-9a-z]{26})(?:\s+|$)/.exec(match[1] ?? '');
  const rest = named ? match[1]!.slice(named[0].length) : match[1] ?? '';
  // No leading hyphen makes it read like an option anywhere.
  return { jobId: named?.[1], text: stripLeadingHyphens(rest).trim() };
}

// Minutes, seconds or any fraction, then Z or an offset with or without its colon (Jira writes `+0300`).
const ISO_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(?:Z|([+-]\d{2}):?(\d{2}))$/;

/** A vendor's ISO-8601 comment time in ms (Jira writes `+0300`, GitHub `Z`), else null. */
export function commentTime(value: unknown): number | null {
  const m = typeof value === 'string' ? ISO_TIME.exec(value) : null;
  const ms = m ? Date.parse(`${m[1]}${m[2] ? `${m[2]}:${m[3]}` : 'Z'}`) : Number.NaN;
  return Number.isFinite(ms) ? ms : null;
}

export function createAnswerDesk(opts: AnswerDeskOptions) {
  const { stores, log } = opts;
  // The keys of answers being handed to their run (`svc answer`), and their job: claimed only once it has answered or
  // refused, so a crash in between leaves the redelivery free to answer.
  const answering = new Map<string, string>();

  /** Audits the outcome (its row only as far as the database takes it: the outcome stands, and is logged). */
  function audit(
    job: JobRow, req: AnswerRequest, outcome: 'answered' | 'refused', reason: string | null, detail?: string,
  ): void {
    const fields = { job_id: job.id, origin: req.origin, place: req.place, who: req.who };
    try {
      stores.replies.audit({ ...fields, outcome, reason, at: opts.clock() });
    } catch (err) {
      log.error('could not audit an answer', { ...fields, outcome, error: errorMessage(err) });
    }
    if (outcome === 'answered') log.info('answer taken', fields);
    else log.warn('answer refused', { ...fields, reason, ...(detail === undefined ? {} : { detail }) });
  }

  /**
   * Claims the keys of an answer `svc answer` took or refused, riding out a brief lock as every answer's claim does
   * (a disk error is not tried again): a redelivery handed over again could answer a newer question. If the database
   * does not take it, the keys stay in `answering`, so this server still calls their copies duplicates; the request is
   * still answered 2xx (handled).
   */
  async function claimHandled(req: AnswerRequest, job: JobRow): Promise<void> {
    try {
      await ridingOut(stores.db, () => stores.dedupe.claim(req.keys, job.id, opts.clock()));
    } catch (err) {
      log.error('could not claim an answer handed to its run: until this server restarts, its redeliveries are ' +
        'duplicates; after, one could be handed over again', { job_id: job.id, keys: req.keys.join(' '),
        error: errorMessage(err) });
      return;
    }
    for (const key of req.keys) answering.delete(key);
  }

  /** A copy of an answer handled, no job to answer, or the jobs it may answer (none: `job` was named elsewhere). */
  function find(req: AnswerRequest): Extract<AnswerOutcome, { kind: 'duplicate' | 'no_job' }>
    | { kind: 'found'; job: JobRow; jobs: JobRow[] } {
    // A redelivery is a duplicate even once the job it answered has ended.
    const earlier = stores.dedupe.holder(req.keys) ?? req.keys.map((k) => answering.get(k)).find((j) => j);
    if (earlier !== undefined) return { kind: 'duplicate', jobId: earlier };
    // The running jobs asked in this thread (bounded by the server's concurrency).
    const all = stores.jobs.listRunning().filter((j) => {
      const target = stores.replies.get(j.id)?.target;
      return target?.thread === req.thread && (req.replyTo === undefined || target.question_message === req.replyTo);
    });
    const jobs = req.jobId ? all.filter((j) => j.id === req.jobId) : all;
    // A job named from elsewhere is refused (and audited) as that job's, not ignored.
    const elsewhere = req.jobId && jobs.length === 0 ? stores.jobs.get(req.jobId) : undefined;
    if (jobs.length === 0 && elsewhere?.status !== 'running') {
      const named = req.jobId ? ` as job ${req.jobId}` : '';
      return { kind: 'no_job', reason: `no running svc job was asked here${named}` };
    }
    return { kind: 'found', job: jobs[0] ?? elsewhere!, jobs };
  }

  async function answer(req: AnswerRequest): Promise<AnswerOutcome> {
    // A question's stamp the database refused is written first (a lock past BUSY_TRIES answers this request 503): a
    // reply matched against the stamp before it would be matched against the earlier question.
    await ridingOut(stores.db, opts.writeStamps);
    let standing: true | string = true;
    if (req.standing) {
      const first = find(req);
      if (first.kind !== 'found') return first;
      if (first.jobs.length > 0) standing = await req.standing();
    }
    // Looked up (again, after the vendor was asked: a copy may have been handled meanwhile) right before the claim.
    const found = find(req);
    if (found.kind !== 'found') return found;
    const { job, jobs } = found;
    // Synchronous from the look-up to the mark in `answering`: two copies of one delivery cannot both pass. A claim
    // the lock refuses is tried again while the keys stay marked; past BUSY_TRIES they are let go and this is a 503.
    const refuse = async (reason: string) => {
      for (const key of req.keys) answering.set(key, job.id);
      try {
        await ridingOut(stores.db, () => stores.dedupe.claim(req.keys, job.id, opts.clock()));
      } finally {
        for (const key of req.keys) answering.delete(key);
      }
      audit(job, req, 'refused', reason);
      return { kind: 'refused' as const, jobId: job.id, reason };
    };
    if (jobs.length === 0) {
      return { ...await refuse(`job ${job.id} was not asked here: answer it where it was asked`), elsewhere: true };
    }
    const refusal = req.refusal(job) ?? (standing === true ? null : standing);
    if (refusal !== null) return refuse(refusal);
    // Written for what the run asks now: not before the job was queued, nor before its current question was asked
    // (notify.ts keeps when), each down to its second, as a vendor's timestamp has no finer part.
    const askedAt = stores.replies.get(job.id)?.target.asked_at;
    const since = Math.max(job.created_at, typeof askedAt === 'number' ? askedAt : 0);
    if (req.writtenAt !== undefined && !(req.writtenAt !== null && req.writtenAt >= Math.floor(since / 1000) * 1000)) {
      return refuse(`the comment was written before job ${job.id} was queued or asked what it waits on (or says ` +
        'not when): a delivery sent again is never an answer to a newer question');
    }
    if (jobs.length > 1) {
      return refuse(`${jobs.length} jobs run here (${jobs.map((j) => j.id).join(', ')}): ` +
        `name one, "${ANSWER_COMMAND} <job id> <your answer>"`);
    }
    if (req.text === '') return refuse(`the answer is empty: write "${ANSWER_COMMAND} <your answer>"`);
    if (Buffer.byteLength(req.text) > MAX_ANSWER_BYTES) {
      return refuse(`the answer is longer than ${MAX_ANSWER_BYTES} bytes, the most a run takes`);
    }
    if (!job.run_source || !job.run_id || !job.workdir) return refuse(`job ${job.id} has no run yet`);
    if (!opts.executor.answer) return refuse('this trigger server\'s executor cannot answer its runs');
    const run = { source: job.run_source, run: job.run_id };
    // Marked as the origin's (never a raise of the operator's daily caps): route and vendor's name, one short line.
    const by = [...`${req.origin}:${req.who}`.replace(/\p{Cc}+/gu, ' ')].slice(0, 200).join('');
    for (const key of req.keys) answering.set(key, job.id);
    let result;
    try {
      result = await opts.executor.answer(run, req.text, job.workdir, by);
    } catch (err) {
      for (const key of req.keys) answering.delete(key);
      throw err;
    }
    await claimHandled(req, job);
    if (!result.ok) {
      audit(job, req, 'refused', result.reason, result.detail);
      return { kind: 'refused', jobId: job.id, reason: result.reason };
    }
    audit(job, req, 'answered', null);
    void opts.progress(job.id, { step: 'answered', by: req.who });
    return { kind: 'answered', jobId: job.id, run: `${run.source}/${run.run}` };
  }

  return {
    /** The audit of a job's answers, oldest first. */
    of: (jobId: string) => stores.replies.answersOf(jobId),
    answer,
    /** `answer` as the route's 2xx, and a refusal's reply where it was written: one per person and job. */
    async reply(req: AnswerRequest): Promise<Reply> {
      const outcome = await answer(req);
      if (outcome.kind === 'no_job') return json(200, { status: 'skipped', reason: outcome.reason });
      if (outcome.kind === 'duplicate') return json(200, { status: 'duplicate', job_id: outcome.jobId });
      const { jobId } = outcome;
      if (outcome.kind === 'answered') return json(200, { status: 'answered', job_id: jobId, run: outcome.run });
      const refusals = stores.replies.answersOf(jobId).filter((a) => a.who === req.who && a.outcome === 'refused');
      if (refusals.length === 1 && !outcome.elsewhere) {
        void opts.note(jobId, [
          [{ own: `svc job ${jobId} did not take the answer from ` }, data(req.who)],
          [{ own: 'why: ' }, data(outcome.reason)],
        ]);
      }
      return json(200, { status: 'refused', job_id: jobId, reason: outcome.reason });
    },
  };
}

/** A tracker's answer is refused when its job's repository is no longer served (then for its `standing`). */
export function teamRefusal(repos: Pick<RepoRouter, 'byName'>): (job: JobRow) => string | null {
  return (job) => (job.repo !== null && !repos.byName(job.repo) ? `"${job.repo}" is no longer served` : null);
}
