// Reply targets, a job row's reply columns (written with the job by the jobs store, trigger migration 14): read and
// updated as its replies go out; and the audit of the answers that came back through them (trigger migration 8).
import type { Db } from './open.ts';

type NotifyStatus = 'sent' | 'failed' | 'skipped';

/** One answer that came in from a job's origin, taken or refused. */
export interface AnswerAudit {
  job_id: string | null;
  origin: string;
  /** Where it was written: `github acme/api#12 comment 99`, `chata channel C1`. */
  place: string;
  /** Who wrote it, as the vendor names them (a GitHub login, a chat user id). */
  who: string;
  outcome: 'answered' | 'refused';
  reason: string | null;
  at: number;
}

export function createTriggerRepliesStore(db: Db) {
  const get = db.prepare('SELECT id AS job_id, reply_channel AS channel, reply_target AS target, notify_status ' +
    'FROM jobs WHERE id = ? AND reply_channel IS NOT NULL');
  const audit = db.prepare(
    'INSERT INTO answers (job_id, origin, place, who, outcome, reason, at) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  const answersOf = db.prepare(
    'SELECT job_id, origin, place, who, outcome, reason, at FROM answers WHERE job_id = ? ORDER BY id',
  );
  const patch = db.prepare(
    'UPDATE jobs SET reply_target = json_patch(reply_target, ?) WHERE id = ? AND reply_channel IS NOT NULL',
  );
  const mark = db.prepare(
    'UPDATE jobs SET notify_status = ?, notified_at = ? WHERE id = ? AND reply_channel IS NOT NULL',
  );
  // Only `finish` sets finished_at, to an end status; a status test here made SQLite walk jobs_by_status and sort,
  // without it the scan goes through jobs_by_finished, finished jobs alone, in order (EXPLAIN QUERY PLAN).
  const pending = db.prepare(
    'SELECT id AS job_id FROM jobs WHERE finished_at IS NOT NULL AND reply_channel IS NOT NULL ' +
      'AND notify_status IS NULL ORDER BY finished_at',
  );
  return {
    /** Records an answer that came in (the audit row); never changes a job. */
    audit(row: AnswerAudit): void {
      audit.run(row.job_id, row.origin, row.place, row.who, row.outcome, row.reason, row.at);
    },
    /** The answers a job got, oldest first (GET /jobs/<id>). */
    answersOf(jobId: string): AnswerAudit[] {
      return answersOf.all(jobId) as unknown as AnswerAudit[];
    },
    get(jobId: string) {
      type Row = { job_id: string; channel: string; target: string; notify_status: NotifyStatus | null };
      const row = get.get(jobId) as Row | undefined;
      return row ? { ...row, target: JSON.parse(row.target) as Record<string, unknown> } : undefined;
    },
    markNotified(jobId: string, status: NotifyStatus, at: number): void {
      mark.run(status, at, jobId);
    },
    /**
     * Keeps what a reply learned with its target (the id of GitHub's progress comment, the question being asked),
     * merged in SQL (RFC 7396: a null removes its key).
     */
    patchTarget(jobId: string, learned: Record<string, unknown>): void {
      patch.run(JSON.stringify(learned), jobId);
    },
    /** Finished jobs whose summary never went out (the server stopped in between). */
    listPending(): string[] {
      return (pending.all() as { job_id: string }[]).map((r) => r.job_id);
    },
  };
}
