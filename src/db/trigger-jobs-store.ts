// The trigger server's jobs table: typed rows in, typed rows out; statements prepared once.
import { LIMIT_PARAM, type Db } from './open.ts';

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'interrupted'] as const;
type JobStatus = (typeof JOB_STATUSES)[number];

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
  /** The summary's parts as JSON (summary.ts), rendered per vendor when sent; null before migration 5. */
  summary_parts: string | null;
  error: string | null;
  /** The served repository (owner/name) it was routed to; null before migration 6. */
  repo: string | null;
  /** Where its `svc start` ran (set just before launch); null until then. */
  workdir: string | null;
  /** The run id its launch was given (`--run-id`, set with `workdir`); null until then and before migration 13. */
  launch_run: string | null;
  /** Its launcher's process identity as JSON (engine/proc-group.ts ProcIdentity) while it may run; else null. */
  launcher: string | null;
  /** Automatic starts-over of its run after an infra failure; never the job's own retry. */
  infra_retries: number;
  /** Times a restart queued it again: its launch, lost with the server, had made no run (job-loop.ts). */
  requeues: number;
  /** Its span as a traceparent, and its parent span's id (job-trace.ts). */
  traceparent: string | null;
  trace_parent: string | null;
}

export type NewJob = Pick<JobRow, 'id' | 'origin' | 'brief' | 'args' | 'created_at'> & {
  repo: string;
  trace?: { traceparent: string; parent: string | null } | undefined;
  /** Where its progress and summary go (trigger-replies-store.ts reads and updates it). */
  reply?: { channel: string; target: Record<string, unknown> } | undefined;
};

type JobEnd = Pick<JobRow, 'exit_code' | 'summary' | 'summary_parts' | 'error'> & {
  status: 'succeeded' | 'failed' | 'interrupted';
  finished_at: number;
};

export type TriggerJobsStore = ReturnType<typeof createTriggerJobsStore>;

type Row = Omit<JobRow, 'args'> & { args: string };

/** The argv as stored: its element that is the brief as `null`, so a row does not carry it twice (docs/bench.md). */
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

// Listed, never `*`: the reply columns (a Slack response_url is a credential to post) are the replies store's alone.
const COLUMNS = 'id, origin, status, brief, args, created_at, started_at, finished_at, run_source, run_id, ' +
  'exit_code, summary, summary_parts, error, repo, workdir, launch_run, launcher, infra_retries, requeues, ' +
  'traceparent, trace_parent';

export function createTriggerJobsStore(db: Db) {
  const insert = db.prepare(
    'INSERT INTO jobs (id, origin, status, brief, args, created_at, repo, traceparent, trace_parent, reply_channel, ' +
      "reply_target) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const countQueued = db.prepare("UPDATE job_counts SET n = n + ? WHERE status = 'queued'");
  const countOrigin = db.prepare('UPDATE queued_by_origin SET n = n + ? WHERE origin = ?');
  const remove = db.prepare('DELETE FROM jobs WHERE id = ?');
  const get = db.prepare(`SELECT ${COLUMNS} FROM jobs WHERE id = ?`);
  const onBranch = db.prepare(
    `SELECT ${COLUMNS} FROM jobs WHERE repo = ? AND (run_id = ? OR args LIKE ?) ` +
      'ORDER BY created_at DESC, id DESC LIMIT 500',
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
    `SELECT ${COLUMNS} FROM jobs WHERE status = 'queued' AND repo IS ? AND origin = ? ` +
      'ORDER BY created_at, id LIMIT 1',
  );
  // Never a job that still has a claim: its delete would take the claim by cascade, past the dedupe store's index.
  const pruneFinished = db.prepare(
    `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?
     AND status IN ('succeeded', 'failed', 'interrupted')
     AND NOT EXISTS (SELECT 1 FROM dedupe_keys WHERE job_id = jobs.id) ORDER BY finished_at ${LIMIT_PARAM})`,
  );
  const setLaunch = db.prepare('UPDATE jobs SET workdir = ?, launch_run = ? WHERE id = ?');
  const setLauncher = db.prepare('UPDATE jobs SET launcher = ? WHERE id = ?');
  const running = db.prepare(`SELECT ${COLUMNS} FROM jobs WHERE status = 'running' ORDER BY created_at, id`);
  const claim = db.prepare("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'");
  const unclaim = db.prepare(
    "UPDATE jobs SET status = 'queued', started_at = NULL WHERE id = ? AND status = 'running' AND workdir IS NULL " +
      'AND run_id IS NULL',
  );
  // Everything of its lost launch goes (a new launch picks a new run id); its dedupe keys and reply target stay.
  const requeue = db.prepare(
    "UPDATE jobs SET status = 'queued', started_at = NULL, workdir = NULL, launch_run = NULL, launcher = NULL, " +
      "run_source = NULL, run_id = NULL, exit_code = NULL, error = ?, requeues = requeues + 1 WHERE id = ? AND " +
      "status = 'running'",
  );
  const setRun = db.prepare('UPDATE jobs SET run_source = ?, run_id = ?, exit_code = ?, launcher = NULL WHERE id = ?');
  const setInfraRetries = db.prepare('UPDATE jobs SET infra_retries = ? WHERE id = ?');
  const finish = db.prepare(
    'UPDATE jobs SET status = ?, finished_at = ?, exit_code = coalesce(?, exit_code), ' +
      'summary = ?, summary_parts = ?, error = ? ' +
      "WHERE id = ? AND status IN ('queued', 'running')",
  );
  return {
    /** A queued job, counted by `count` once per transaction (group commit: once per COMMIT, docs/bench.md). */
    insertUncounted(job: NewJob): void {
      const { reply } = job;
      insert.run(job.id, job.origin, job.brief, storedArgs(job.args, job.brief), job.created_at, job.repo,
        job.trace?.traceparent ?? null, job.trace?.parent ?? null, reply?.channel ?? null,
        reply ? JSON.stringify(reply.target) : null);
    },
    count(inserted: ReadonlyMap<string, number>): void {
      let all = 0;
      for (const [origin, n] of inserted) {
        countOrigin.run(n, origin);
        all += n;
      }
      if (all > 0) countQueued.run(all);
    },
    /** Deletes a job with its reply target and (cascade) its dedupe keys: one its transaction did not keep. */
    remove(id: string): void {
      remove.run(id);
    },
    get(id: string): JobRow | undefined {
      return toJob(get.get(id) as Row | undefined);
    },
    /** The jobs of svc's PR, newest first: the one whose run made svc/<run>, and its follow-ups (`run`: base32). */
    onPullRequestBranch(repo: string, run: string): JobRow[] {
      const followUps = `%${JSON.stringify(['--follow-up', `svc/${run}`]).slice(1, -1)}%`;
      return (onBranch.all(repo, run, followUps) as Row[]).map((r) => toJob(r)!);
    },
    countByStatus(status: JobStatus): number {
      return (count.get(status) as { n: number } | undefined)?.n ?? 0;
    },
    /** Gives each origin a queued_by_origin row unless it has one: a new source needs no migration. */
    countOrigins(origins: readonly string[]): void {
      for (const origin of origins) if (!hasOrigin.get(origin)) addOrigin.run(origin, origin);
    },
    /** Queued jobs per origin (only origins with some). */
    queuedByOrigin(): Map<string, number> {
      const counts = new Map<string, number>();
      for (const row of byOrigin.all() as { origin: string; n: number }[]) counts.set(row.origin, row.n);
      return counts;
    },
    /** Queued jobs per (repo, origin) pair. */
    queuedGroups() {
      return groups.all() as Array<{ repo: string | null; origin: string; n: number }>;
    },
    oldestQueuedIn(repo: string | null, origin: string): JobRow | undefined {
      return toJob(oldestIn.get(repo, origin) as Row | undefined);
    },
    /** Where the job's launcher runs and the run id it is given, recorded before it may make that run. */
    setLaunch(id: string, workdir: string, run: string): void {
      setLaunch.run(workdir, run, id);
    },
    /** Its launcher's identity (JSON), recorded once it started; null once it was withdrawn; dropped with its run. */
    setLauncher(id: string, launcher: string | null): void {
      setLauncher.run(launcher, id);
    },
    listRunning(): JobRow[] {
      return (running.all() as Row[]).map((r) => toJob(r)!);
    },
    /** queued → running; false when another dispatcher got there first. */
    claim(id: string, startedAt: number): boolean {
      return claim.run(startedAt, id).changes === 1;
    },
    /** running → queued, for a job that never reached its launch (no checkout recorded): nothing was started. */
    unclaim(id: string): boolean {
      return unclaim.run(id).changes === 1;
    },
    /** running → queued after a lost launch that made no run, `why` kept as its error until it ends. */
    requeue(id: string, why: string): boolean {
      return requeue.run(why, id).changes === 1;
    },
    setRun(id: string, source: string, run: string, exitCode: number | null): void {
      setRun.run(source, run, exitCode, id);
    },
    /** A count, not an increment: re-reading a run changes nothing. */
    setInfraRetries(id: string, n: number): void {
      setInfraRetries.run(n, id);
    },
    /** Deletes up to `limit` finished jobs ended before `before` whose claims are gone (reply targets in the rows). */
    pruneFinished(before: number, limit: number): number {
      return Number(pruneFinished.run(before, limit).changes);
    },
    finish(id: string, end: JobEnd): boolean {
      const { status, finished_at, exit_code, summary, summary_parts, error } = end;
      return finish.run(status, finished_at, exit_code, summary, summary_parts, error, id).changes === 1;
    },
  };
}
