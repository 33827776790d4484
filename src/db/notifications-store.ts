// Outbound messages about runs (completion summaries to chat and trackers) and how their delivery went, as the
// trigger server reports them through POST /v1/ingest. Chat reply URLs carry capability tokens in their path, so
// whoever the caller is, a target is stored as a host; error text arrives with its secrets and URL paths cut
// (control/ingest-apply.ts, the one way rows come in) and is capped here.
import { LIMIT_PARAM, transaction, type Db } from './open.ts';

export const NOTIFICATION_STATUSES = ['pending', 'sent', 'failed'] as const;

export interface NotificationInput {
  job_id: string | null;
  source: string | null;
  run: string | null;
  origin: string;
  channel: string;
  target: string | null;
  status: (typeof NOTIFICATION_STATUSES)[number];
  attempts: number;
  error: string | null;
  created_at: number;
  updated_at: number;
}

export interface NotificationRow {
  id: number;
  /**
   * The source whose batch reported the row: what the Control Plane saw, where `origin` is what it was told. Null only
   * on a row about a job alone stored before control migration 10.
   */
  reported_by: string | null;
}

const COLUMNS = 'id, job_id, reported_by, source, run, origin, channel, target, status, attempts, error, created_at, ' +
  'updated_at';

export function createNotificationsStore(db: Db) {
  const upsert = db.prepare(
    'INSERT INTO notifications ' +
      '(job_id, reported_by, source, run, origin, channel, target, status, attempts, error, created_at, updated_at) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
      'ON CONFLICT (reported_by, job_id, channel) WHERE job_id IS NOT NULL DO UPDATE SET ' +
      'source = excluded.source, run = excluded.run, origin = excluded.origin, target = excluded.target, ' +
      'status = excluded.status, ' +
      'attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at ' +
      'WHERE excluded.updated_at >= notifications.updated_at',
  );
  const page = db.prepare(
    `SELECT ${COLUMNS} FROM notifications WHERE (created_at, id) < (?, ?) ` +
      `ORDER BY created_at DESC, id DESC ${LIMIT_PARAM}`,
  );

  return {
    /**
     * Upserts by (job_id, channel) among the rows `reportedBy` (the ingest batch's source) reported, never over a newer
     * `updated_at`: one source's report never rewrites another's row. Rows without a job id are inserted.
     */
    ingest(reportedBy: string, list: readonly NotificationInput[]): number {
      return transaction(db, () => {
        let changed = 0;
        for (const n of list) {
          const r = upsert.run(
            n.job_id, reportedBy, n.source, n.run, n.origin, n.channel, hostOnly(n.target),
            n.status, n.attempts, n.error ? n.error.slice(0, 500) : null, n.created_at, n.updated_at,
          );
          changed += Number(r.changes);
        }
        return changed;
      });
    },
    /** Newest first by (created_at, id), strictly after `after`. */
    list({ limit, after }: { limit: number; after?: { created_at: number; id: number } | null }) {
      const { created_at, id } = after ?? { created_at: Number.MAX_SAFE_INTEGER, id: Number.MAX_SAFE_INTEGER };
      return page.all(created_at, id, limit) as unknown as Array<NotificationInput & NotificationRow>;
    },
  };
}

/** A URL becomes its host (no user info, path or query); a bare host name stays; anything else becomes null. */
function hostOnly(target: string | null): string | null {
  if (target === null || target.length === 0) return null;
  const url = URL.parse(target);
  if (url?.hostname) return url.host.slice(0, 255);
  return /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$/.test(target) ? target : null;
}

