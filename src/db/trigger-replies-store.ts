// Reply targets keyed by job id: written only after a delivery verified, read once the job ends.
import type { Db } from './open.ts';

export type NotifyStatus = 'sent' | 'failed' | 'skipped';

export interface ReplyTargetRow {
  job_id: string;
  channel: string;
  target: Record<string, unknown>;
  notify_status: NotifyStatus | null;
}

export interface TriggerRepliesStore {
  insert(jobId: string, channel: string, target: Record<string, unknown>, at: number): void;
  get(jobId: string): ReplyTargetRow | undefined;
  markNotified(jobId: string, status: NotifyStatus, at: number): void;
  /** Finished jobs whose summary never went out (the server stopped in between). */
  listPending(): string[];
}

export function createTriggerRepliesStore(db: Db): TriggerRepliesStore {
  const insert = db.prepare('INSERT INTO reply_targets (job_id, channel, target, created_at) VALUES (?, ?, ?, ?)');
  const get = db.prepare('SELECT job_id, channel, target, notify_status FROM reply_targets WHERE job_id = ?');
  const mark = db.prepare('UPDATE reply_targets SET notify_status = ?, notified_at = ? WHERE job_id = ?');
  const pending = db.prepare(
    'SELECT r.job_id FROM reply_targets r JOIN jobs j ON j.id = r.job_id WHERE r.notify_status IS NULL ' +
      "AND j.status IN ('succeeded', 'failed', 'interrupted') ORDER BY j.finished_at",
  );
  return {
    insert(jobId, channel, target, at) {
      insert.run(jobId, channel, JSON.stringify(target), at);
    },
    get(jobId) {
      const row = get.get(jobId) as
        | { job_id: string; channel: string; target: string; notify_status: NotifyStatus | null }
        | undefined;
      return row ? { ...row, target: JSON.parse(row.target) as Record<string, unknown> } : undefined;
    },
    markNotified(jobId, status, at) {
      mark.run(status, at, jobId);
    },
    listPending() {
      return (pending.all() as { job_id: string }[]).map((r) => r.job_id);
    },
  };
}
