// The trigger server's jobs table and the dedupe keys each job claimed with it (its own table, read through an index
// kept in memory): typed rows in, typed rows out; statements prepared once.
import { LIMIT_PARAM, type Db } from './open.ts';

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
  /** Its span as a traceparent, and its parent span's id (job-trace.ts). */
  traceparent: string | null;
  trace_parent: string | null;
}

export type NewJob = Pick<JobRow, 'id' | 'origin' | 'brief' | 'args' | 'created_at'> & {
  repo: string;
  trace?: { traceparent: string; parent: string | null } | undefined;
};

export type JobEnd = Pick<JobRow, 'exit_code' | 'summary' | 'summary_parts' | 'error'> & {
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

export function createTriggerJobsStore(db: Db) {
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
  const pruneFinished = db.prepare(
    `DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?
     AND status IN ('succeeded', 'failed', 'interrupted') ORDER BY finished_at ${LIMIT_PARAM})`,
  );
  const setLaunch = db.prepare('UPDATE jobs SET workdir = ?, launch_run = ? WHERE id = ?');
  const setLauncher = db.prepare('UPDATE jobs SET launcher = ? WHERE id = ?');
  const running = db.prepare("SELECT * FROM jobs WHERE status = 'running' ORDER BY created_at, id");
  const claim = db.prepare("UPDATE jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'");
  const unclaim = db.prepare(
    "UPDATE jobs SET status = 'queued', started_at = NULL WHERE id = ? AND status = 'running' AND workdir IS NULL " +
      'AND run_id IS NULL',
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
      insert.run(job.id, job.origin, job.brief, storedArgs(job.args, job.brief), job.created_at, job.repo,
        job.trace?.traceparent ?? null, job.trace?.parent ?? null);
    },
    count(inserted: ReadonlyMap<string, number>): void {
      let all = 0;
      for (const [origin, n] of inserted) {
        countOrigin.run(n, origin);
        all += n;
      }
      if (all > 0) countQueued.run(all);
    },
    /** Deletes a job with its dedupe keys and reply target (cascade): one its transaction did not keep. */
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
    /** Where the job's launcher runs and the run id it is given, recorded before it starts. */
    setLaunch(id: string, workdir: string, run: string): void {
      setLaunch.run(workdir, run, id);
    },
    /** Its launcher's identity (JSON), recorded once it started; dropped when its run is recorded. */
    setLauncher(id: string, launcher: string): void {
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
    setRun(id: string, source: string, run: string, exitCode: number | null): void {
      setRun.run(source, run, exitCode, id);
    },
    /** A count, not an increment: re-reading a run changes nothing. */
    setInfraRetries(id: string, n: number): void {
      setInfraRetries.run(n, id);
    },
    /** Deletes up to `limit` finished jobs ended before `before` (keys and reply target by cascade); how many. */
    pruneFinished(before: number, limit: number): number {
      return Number(pruneFinished.run(before, limit).changes);
    },
    finish(id: string, end: JobEnd): boolean {
      const { status, finished_at, exit_code, summary, summary_parts, error } = end;
      return finish.run(status, finished_at, exit_code, summary, summary_parts, error, id).changes === 1;
    },
  };
}

// Dedupe keys, claimed in the same transaction as their job: an append-only table (one row per claim, its keys as a
// JSON array) found through an in-memory index of key hashes → row ids, each hit confirmed by its row; the index
// catches up with rows other connections committed (docs/trigger.md "How keys are looked up"; docs/bench.md).

/** FNV-1a over the UTF-16 code units, never 0 (a slot's 0 means never used; every hit is confirmed by its row). */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return h >>> 0 || 1;
}

/** Slots filled (removed ones included) past which the table is rebuilt: 3/4, as `rebuild` counts. */
const MAX_LOAD = 0.75;
const MIN_SLOTS = 1024;

type ClaimRow = { keys: string; job_id: string };

/** A row's keys: a JSON array of strings, written only by `claim` and migration 12. */
function keysOf(text: string): string[] {
  return JSON.parse(text) as string[];
}

export function createTriggerDedupeStore(db: Db) {
  // In chunks through all(): iterate() cost ~3× as much per row when the index is built at start.
  const since = db.prepare('SELECT id, keys FROM dedupe_keys WHERE id > ? ORDER BY id LIMIT 4096');
  since.setReturnArrays(true);
  const byId = db.prepare('SELECT keys, job_id FROM dedupe_keys WHERE id = ?');
  const add = db.prepare('INSERT INTO dedupe_keys (keys, job_id, created_at) VALUES (?, ?, ?)');
  const expired = db.prepare(`DELETE FROM dedupe_keys WHERE id IN
    (SELECT id FROM dedupe_keys WHERE created_at < ? ORDER BY created_at ${LIMIT_PARAM}) RETURNING id, keys`);
  expired.setReturnArrays(true);
  // Every committed row up to here is indexed (set from committed rows only: a rolled-back id is read again).
  let seen = 0;

  // The index: each claimed key's hash and its row id in a slot of two typed arrays (open addressing, probed linearly
  // from the hash's slot), not Maps: a look-up of a new key reads a few adjacent hashes, and the garbage collector has
  // nothing to walk (docs/bench.md). `hashes[i]` 0: never used; `ids[i]` 0: removed (row ids start at 1).
  let hashes = new Uint32Array(MIN_SLOTS);
  let ids = new Float64Array(MIN_SLOTS);
  let shift = 32 - Math.log2(MIN_SLOTS);
  let filled = 0;
  let live = 0;

  /** The slot probing for `h` starts at (Fibonacci hashing: the hash's bits spread over the table's). */
  const firstSlot = (h: number): number => Math.imul(h, 0x9e3779b1) >>> shift;

  function put(h: number, id: number): void {
    const mask = hashes.length - 1;
    let i = firstSlot(h);
    while (hashes[i] !== 0) i = (i + 1) & mask;
    hashes[i] = h;
    ids[i] = id;
    filled++;
    live++;
  }

  /** A table of the live entries alone, sized so they fill at most half of MAX_LOAD of it. */
  function rebuild(): void {
    const [oldHashes, oldIds] = [hashes, ids];
    let size = MIN_SLOTS;
    while (live > size * (MAX_LOAD / 2)) size *= 2;
    hashes = new Uint32Array(size);
    ids = new Float64Array(size);
    shift = 32 - Math.log2(size);
    filled = 0;
    live = 0;
    for (let i = 0; i < oldHashes.length; i++) if (oldIds[i] !== 0) put(oldHashes[i]!, oldIds[i]!);
  }

  function index(id: number, key: string, h = hashOf(key)): void {
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) if (hashes[i] === h && ids[i] === id) return;
    if (filled + 1 > hashes.length * MAX_LOAD) rebuild();
    put(h, id);
  }

  function unindex(id: number, key: string): void {
    const h = hashOf(key);
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) {
      if (hashes[i] === h && ids[i] === id) {
        ids[i] = 0;
        live--;
      }
    }
  }

  // This connection's last claim in a write transaction: its row there at the next catch-up means it committed, and
  // the rows before it since that transaction's catch-up were its own, indexed already (it held the write lock).
  let claimed: { id: number; keys: string; jobId: string } | null = null;

  function catchUp(): void {
    if (claimed !== null) {
      const row = byId.get(claimed.id) as ClaimRow | undefined;
      if (row?.keys === claimed.keys && row.job_id === claimed.jobId) seen = Math.max(seen, claimed.id);
      claimed = null;
    }
    for (;;) {
      const rows = since.all(seen) as unknown as [number, string][];
      for (const [id, keys] of rows) for (const key of keysOf(keys)) index(id, key);
      if (rows.length > 0) seen = rows[rows.length - 1]![0];
      if (rows.length < 4096) return;
    }
  }

  /** The job whose row holds exactly this key, each hash hit confirmed by the row itself. */
  function holderOf(key: string, h = hashOf(key)): string | undefined {
    const mask = hashes.length - 1;
    for (let i = firstSlot(h); hashes[i] !== 0; i = (i + 1) & mask) {
      if (hashes[i] !== h || ids[i] === 0) continue;
      const row = byId.get(ids[i]!) as ClaimRow | undefined;
      if (row !== undefined && keysOf(row.keys).includes(key)) return row.job_id;
    }
    return undefined;
  }

  catchUp();
  return {
    /** Call first in every write transaction that claims keys: reads the keys other connections committed. */
    catchUp,
    /** The job that holds any of these keys: committed, or claimed earlier in the open transaction. */
    holder(keys: readonly string[]): string | undefined {
      // Inside a transaction the caller caught up first; reading here could index its own uncommitted rows.
      if (!db.isTransaction) catchUp();
      for (const key of keys) {
        const holder = holderOf(key);
        if (holder !== undefined) return holder;
      }
      return undefined;
    },
    /** Claims the keys (one at least, none of them the job's yet), or returns the job holding one and claims none. */
    claim(keys: readonly string[], jobId: string, at: number): string | undefined {
      const fresh: string[] = [];
      const hashes: number[] = [];
      for (const key of keys) {
        if (fresh.includes(key)) continue;
        const h = hashOf(key);
        const holder = holderOf(key, h);
        if (holder !== undefined) return holder;
        fresh.push(key);
        hashes.push(h);
      }
      const text = JSON.stringify(fresh);
      const id = Number(add.run(text, jobId, at).lastInsertRowid);
      for (let i = 0; i < fresh.length; i++) index(id, fresh[i]!, hashes[i]);
      if (db.isTransaction) claimed = { id, keys: text, jobId };
      return undefined;
    },
    /** Deletes up to `limit` claims made before `before` and their index entries; returns how many keys. */
    prune(before: number, limit: number): number {
      const rows = expired.all(before, limit) as unknown as [number, string][];
      let keys = 0;
      for (const [id, text] of rows) {
        const claimedKeys = keysOf(text);
        for (const key of claimedKeys) unindex(id, key);
        keys += claimedKeys.length;
      }
      return keys;
    },
  };
}
