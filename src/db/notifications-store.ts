// Outbound messages about runs (completion summaries to chat and trackers) and how their delivery went.
// Rows arrive from the trigger server through POST /v1/ingest; `target` holds a host, never a URL with secrets in it.
import type { Db } from './open.ts';
import { inTransaction } from './tx.ts';
import { hostOnly, scrubError } from './notification-scrub.ts';
import { LIMIT_PARAM } from './limit-param.ts';

export const NOTIFICATION_STATUSES = ['pending', 'sent', 'failed'] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

export interface NotificationInput {
  job_id: string | null;
  source: string | null;
  run: string | null;
  origin: string;
  channel: string;
  target: string | null;
  status: NotificationStatus;
  attempts: number;
  error: string | null;
  created_at: number;
  updated_at: number;
}

export interface NotificationRow extends NotificationInput {
  id: number;
}

export interface NotificationKey {
  created_at: number;
  id: number;
}

export interface NotificationsStore {
  /**
   * Upserts by (job_id, channel) so the trigger server can re-send a notification as its delivery progresses;
   * an older `updated_at` never overwrites a newer row. Rows without a job id are always inserted.
   * Targets are cut to a host and URLs in errors to scheme and host, whatever the caller already did.
   * Returns how many rows were inserted or changed. Composes with an open transaction (ingest's).
   */
  ingest(list: readonly NotificationInput[]): number;
  /** Newest first by (created_at, id), strictly after `after`. */
  list(opts: { limit: number; after?: NotificationKey | null }): NotificationRow[];
}

const COLUMNS = 'id, job_id, source, run, origin, channel, target, status, attempts, error, created_at, updated_at';

export function createNotificationsStore(db: Db): NotificationsStore {
  const upsert = db.prepare(
    'INSERT INTO notifications ' +
      '(job_id, source, run, origin, channel, target, status, attempts, error, created_at, updated_at) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
      'ON CONFLICT (job_id, channel) WHERE job_id IS NOT NULL DO UPDATE SET ' +
      'source = excluded.source, run = excluded.run, origin = excluded.origin, target = excluded.target, ' +
      'status = excluded.status, ' +
      'attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at ' +
      'WHERE excluded.updated_at >= notifications.updated_at',
  );
  const newest = db.prepare(`SELECT ${COLUMNS} FROM notifications ORDER BY created_at DESC, id DESC ${LIMIT_PARAM}`);
  const older = db.prepare(
    `SELECT ${COLUMNS} FROM notifications WHERE (created_at, id) < (?, ?) ` +
      `ORDER BY created_at DESC, id DESC ${LIMIT_PARAM}`,
  );

  return {
    ingest(list) {
      return inTransaction(db, () => {
        let changed = 0;
        for (const n of list) {
          const target = hostOnly(n.target);
          const error = scrubError(n.error);
          const r = upsert.run(
            n.job_id, n.source, n.run, n.origin, n.channel, target,
            n.status, n.attempts, error, n.created_at, n.updated_at,
          );
          changed += Number(r.changes);
        }
        return changed;
      });
    },
    list({ limit, after }) {
      const rows = after ? older.all(after.created_at, after.id, limit) : newest.all(limit);
      return rows as unknown as NotificationRow[];
    },
  };
}
