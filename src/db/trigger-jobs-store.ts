// The trigger server's jobs table: typed rows in, typed rows out; statements prepared once.
import { inTransaction, type Db } from './open.ts';

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'interrupted';

export interface JobRow {
  id: string;
  origin: string;
  status: JobStatus;
  brief: string;
  args: string[];
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  run_source: string | null;
  run_id: string | null;
  exit_code: number | null;
  summary: string | null;
  /** The summary's parts as JSON (summary.ts), rendered per vendor when it is sent; null before migration 5. */
  summary_parts: string | null;
  error: string | null;
  /** The served repository (owner/name) it was routed to; null for a job accepted before migration 6. */
  repo: string | null;
  /** Where its `svc start` ran (set just before launch); null until then. */
  workdir: string | null;
  /** Automatic starts-over of its run after an infra failure (trigger migration 9); never the job's own retry. */
  infra_retries: number;
  /** Its span as a traceparent, and its parent span's id (trigger migration 11; job-trace.ts); null before. */
  traceparent: string | null;
  trace_parent: string | null;
}

export interface NewJob {
  id: string;
  origin: string;
  repo: string;
  brief: string;
  args: string[];
  created_at: number;
  trace?: { traceparent: string; parent: string | null } | undefined;
}

export interface JobEnd {
  status: 'succeeded' | 'failed' | 'interrupted';
  finished_at: number;
  exit_code: number | null;
  summary: string | null;
  summary_parts: string | null;
  error: string | null;
}

export interface TriggerJobsStore {
  /** Inserts a queued job and counts it (job_counts, queued_by_origin). */
  insert(job: NewJob): void;
  /**
   * Inserts a queued job that the caller counts with `count` in the same transaction, once for every job it
   * inserted: the queue's group commit makes two count updates per COMMIT instead of two per delivery (a trigger per
   * row was ~3 µs of a delivery, docs/bench.md). Deleting it (`remove`) uncounts it, as for any queued job.
   */
  insertUncounted(job: NewJob): void;
  /** Adds jobs inserted by `insertUncounted` to the queued counts: how many, by origin. */
  count(inserted: ReadonlyMap<string, number>): void;
  /** Deletes a job with its dedupe keys and reply target (ON DELETE CASCADE): one its transaction did not keep. */
  remove(id: string): void;
  get(id: string): JobRow | undefined;
  /**
   * The jobs of a pull request svc opened, newest first: the job whose run `run` made its branch svc/<run>, and the
   * follow-up jobs sent to that branch (their argv holds `--follow-up svc/<run>`). `run` is a run id (base32, no
   * LIKE wildcard). A scan of the repository's jobs, made only for a follow-up delivery that passed its dedupe.
   */
  onPullRequestBranch(repo: string, run: string): JobRow[];
  countByStatus(status: JobStatus): number;
  /** Queued jobs per origin (only origins with some), from the trigger-kept queued_by_origin table: O(origins). */
  queuedByOrigin(): Map<string, number>;
  /**
   * Gives each origin a queued_by_origin row (counting its queued jobs) unless it has one: a source added to
   * src/webhook-sources.ts needs no migration of its own. The server calls it once at start.
   */
  countOrigins(origins: readonly string[]): void;
  /** Queued jobs per (repo, origin) pair: one pass over the queued jobs (bounded by the queue's size). */
  queuedGroups(): Array<{ repo: string | null; origin: string; n: number }>;
  /** The oldest queued job of one repository and origin. */
  oldestQueuedIn(repo: string | null, origin: string): JobRow | undefined;
  setWorkdir(id: string, workdir: string): void;
  listRunning(): JobRow[];
  /** queued → running; false when another dispatcher got there first. */
  claim(id: string, startedAt: number): boolean;
  setRun(id: string, source: string, run: string, exitCode: number | null): void;
  finish(id: string, end: JobEnd): boolean;
  /** Records the infra retries its run reported (a count, not an increment: re-reading a run changes nothing). */
  setInfraRetries(id: string, n: number): void;
}

type Row = Omit<JobRow, 'args'> & { args: string };

/**
 * The argv as stored: its first element that is the brief as `null` (no argv element is ever null), so a row does not
 * carry its brief twice (~1 µs and up to 1.5 KB less per delivery, docs/bench.md). Rows written before keep it whole.
 */
function storedArgs(args: readonly string[], brief: string): string {
  const stored: (string | null)[] = [...args];
  const at = args.indexOf(brief);
  if (at >= 0) stored[at] = null;
  return JSON.stringify(stored);
}

function toJob(row: Row | undefined): JobRow | undefined {
  if (!row) return undefined;
  return { ...row, args: (JSON.parse(row.args) as (string | null)[]).map((a) => a ?? row.brief) };
}

export function createTriggerJobsStore(db: Db): TriggerJobsStore {
  const insert = db.prepare(
    "INSERT INTO jobs (id, origin, status, brief, args, created_at, repo, traceparent, trace_parent) " +
      "VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
  );
  const countQueued = db.prepare("UPDATE job_counts SET n = n + ? WHERE status = 'queued'");
  const countOrigin = db.prepare('UPDATE queued_by_origin SET n = n + ? WHERE origin = ?');
  const remove = db.prepare('DELETE FROM jobs WHERE id = ?');
  const get = db.prepare('SELECT * FROM jobs WHERE id = ?');
  const onBranch = db.prepare(
    'SELECT * FROM jobs WHERE repo = ? AND (run_id = ? OR args LIKE ?) ORDER BY created_at DESC, id DESC LIMIT 500',
  );
  const count = db.prepare('SELECT n FROM job_counts WHERE status = ?');
  const byOrigin = db.prepare('SELECT origin, n FROM queued_by_origin WHERE n > 0');
  const addOrigin = db.prepare(`INSERT OR IGNORE INTO queued_by_origin (origin, n)
    SELECT ?, count(*) FROM jobs WHERE status = 'queued' AND origin = ?`);
  const hasOrigin = db.prepare('SELECT 1 FROM queued_by_origin WHERE origin = ?');
  const groups = db.prepare(
    "SELECT repo, origin, count(*) AS n FROM jobs WHERE status = 'queued' GROUP BY repo, origin",
  );
  const oldestIn = db.prepare(
    "SELECT * FROM jobs WHERE status = 'queued' AND repo IS ? AND origin = ? ORDER BY created_at, id LIMIT 1",
  );
  const setWorkdir = db.prepare('UPDATE jobs SET workdir = ? WHERE id = ?');
  const running = db.prepare("SELECT * FROM jobs WHERE status = 'running' ORDER BY created_at, id");
  const claim = db.prepare("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'");
  const setRun = db.prepare('UPDATE jobs SET run_source = ?, run_id = ?, exit_code = ? WHERE id = ?');
  const setInfraRetries = db.prepare('UPDATE jobs SET infra_retries = ? WHERE id = ?');
  const finish = db.prepare(
    'UPDATE jobs SET status = ?, finished_at = ?, exit_code = coalesce(?, exit_code), ' +
      'summary = ?, summary_parts = ?, error = ? ' +
      "WHERE id = ? AND status IN ('queued', 'running')",
  );
  function insertUncounted(job: NewJob): void {
    insert.run(job.id, job.origin, job.brief, storedArgs(job.args, job.brief), job.created_at, job.repo,
      job.trace?.traceparent ?? null, job.trace?.parent ?? null);
  }
  function countInserted(inserted: ReadonlyMap<string, number>): void {
    let all = 0;
    for (const [origin, n] of inserted) {
      countOrigin.run(n, origin);
      all += n;
    }
    if (all > 0) countQueued.run(all);
  }
  return {
    insert(job) {
      inTransaction(db, () => {
        insertUncounted(job);
        countInserted(new Map([[job.origin, 1]]));
      });
    },
    insertUncounted,
    count: countInserted,
    remove(id) {
      remove.run(id);
    },
    get(id) {
      return toJob(get.get(id) as Row | undefined);
    },
    onPullRequestBranch(repo, run) {
      const followUps = `%${JSON.stringify(['--follow-up', `svc/${run}`]).slice(1, -1)}%`;
      return (onBranch.all(repo, run, followUps) as Row[]).map((r) => toJob(r)!);
    },
    countByStatus(status) {
      return (count.get(status) as { n: number } | undefined)?.n ?? 0;
    },
    countOrigins(origins) {
      for (const origin of origins) if (!hasOrigin.get(origin)) addOrigin.run(origin, origin);
    },
    queuedByOrigin() {
      const counts = new Map<string, number>();
      for (const row of byOrigin.all() as { origin: string; n: number }[]) counts.set(row.origin, row.n);
      return counts;
    },
    queuedGroups() {
      return groups.all() as Array<{ repo: string | null; origin: string; n: number }>;
    },
    oldestQueuedIn(repo, origin) {
      return toJob(oldestIn.get(repo, origin) as Row | undefined);
    },
    setWorkdir(id, workdir) {
      setWorkdir.run(workdir, id);
    },
    listRunning() {
      return (running.all() as Row[]).map((r) => toJob(r)!);
    },
    claim(id, startedAt) {
      return claim.run(startedAt, id).changes === 1;
    },
    setRun(id, source, run, exitCode) {
      setRun.run(source, run, exitCode, id);
    },
    setInfraRetries(id, n) {
      setInfraRetries.run(n, id);
    },
    finish(id, end) {
      const { status, finished_at, exit_code, summary, summary_parts, error } = end;
      return finish.run(status, finished_at, exit_code, summary, summary_parts, error, id).changes === 1;
    },
  };
}
