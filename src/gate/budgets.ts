// Budgets on metered cost (docs/gate.md "Budgets"): a run's own (policy max_usd, raised by an answer) and the
// operator's caps per repository and per server per day, counted in a ledger every gate of the machine shares.
import { appendFileSync, closeSync, fstatSync, mkdirSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { isJsonObject, obj, str, tryParseJson } from '../untrusted.ts';
import { BadSettingError, errorMessage } from '../errors.ts';
import { writeFileAtomic } from '../atomic-write.ts';
import type { EgressRecord } from './evidence.ts';

export interface Reached {
  kind: 'run' | 'repository-day' | 'server-day';
  limit: number;
  spent: number;
}

type Budget = 'run' | 'repoDay' | 'serverDay';

/** The first budget reached (run, then repository, then server), or null. */
export function reachedBudget(spent: Record<Budget, number>, limits: Record<Budget, number | null>): Reached | null {
  const rows: Array<[Reached['kind'], number, number | null]> = [
    ['run', spent.run, limits.run], ['repository-day', spent.repoDay, limits.repoDay],
    ['server-day', spent.serverDay, limits.serverDay],
  ];
  for (const [kind, value, limit] of rows) if (limit !== null && value >= limit) return { kind, limit, spent: value };
  return null;
}

const usd = (n: number): string => `$${n.toFixed(2)}`;

export function budgetName(r: Reached, repo: string): string {
  if (r.kind === 'run') return `the run's budget of ${usd(r.limit)}`;
  if (r.kind === 'repository-day') return `the daily budget of ${usd(r.limit)} for ${repo}`;
  return `this server's daily budget of ${usd(r.limit)}`;
}

/** The gate's refusal, as a CLI shows it (`asked`: the engine asks to raise it; not on `svc gate serve`). */
export function refusalText(r: Reached, repo: string, asked = true): string {
  const reached = `${budgetName(r, repo)} is reached (metered ${usd(r.spent)})`;
  if (asked) {
    return `${reached}: svc has paused the run and asked whether to raise it; model calls resume once it is raised`;
  }
  return r.kind === 'run' ? `${reached}: the run stops here (a pod's budget is not raised)`
    : `${reached}: model calls are refused until the operator raises it`;
}

/** Today's spending per repository and in all: shared by the machine's gates through `<folder>/<day>.jsonl`, or
 * without a folder this gate's own (`svc gate serve` sees all its jobs' calls). Each gate counts its own calls in
 * memory as they end and appends them, marked as its own (`by`), for the others: a folder that cannot be written
 * costs the others its lines, never this gate its count. */
export class DayLedger {
  private readonly id = randomUUID();
  private day = '';
  private offset = 0;
  private rest = '';
  private readonly repos = new Map<string, number>();
  private server = 0;
  private readonly folder: string | null;

  constructor(folder: string | null) {
    this.folder = folder;
  }

  private turn(): void {
    const day = new Date().toISOString().slice(0, 10); // the UTC day names the ledger's file
    if (day === this.day) return;
    this.day = day;
    this.offset = 0;
    this.rest = '';
    this.repos.clear();
    this.server = 0;
  }

  private count(repo: string, amount: number): void {
    // Repository names are compared as GitHub compares them; the map holds one day's repositories.
    const key = repo.toLowerCase();
    this.repos.set(key, (this.repos.get(key) ?? 0) + amount);
    this.server += amount;
  }

  /** Counts `amount`, then appends it to the day's file (which may throw: the count stays). */
  add(repo: string, amount: number): void {
    this.turn();
    if (!(amount > 0)) return;
    this.count(repo, amount);
    if (this.folder === null) return;
    mkdirSync(this.folder, { recursive: true, mode: 0o700 });
    // One short line per write, appended: lines of concurrent gates never interleave.
    const line = `${JSON.stringify({ repo, usd: amount, by: this.id })}\n`;
    appendFileSync(join(this.folder, `${this.day}.jsonl`), line, { mode: 0o600 });
  }

  spent(repo: string): { repoDay: number; serverDay: number } {
    this.turn();
    if (this.folder !== null) this.readNew();
    return { repoDay: this.repos.get(repo.toLowerCase()) ?? 0, serverDay: this.server };
  }

  private readNew(): void {
    let fd: number;
    try {
      fd = openSync(join(this.folder!, `${this.day}.jsonl`), 'r');
    } catch {
      return;
    }
    try {
      const size = fstatSync(fd).size;
      if (size <= this.offset) return;
      const buf = Buffer.alloc(Math.min(size - this.offset, 4 * 1024 * 1024));
      const n = readSync(fd, buf, 0, buf.length, this.offset);
      this.offset += n;
      const lines = (this.rest + buf.subarray(0, n).toString('utf8')).split('\n');
      this.rest = lines.pop() ?? '';
      for (const line of lines) {
        const o = obj(tryParseJson(line));
        const repo = str(o.repo);
        // This gate's own lines were counted as it added them.
        if (o.by === this.id) continue;
        if (repo !== null && typeof o.usd === 'number' && Number.isFinite(o.usd) && o.usd > 0) this.count(repo, o.usd);
      }
    } finally {
      closeSync(fd);
    }
  }
}

/** Calls under way a budgeted run may have at `svc gate serve`: what it can spend past its budget. */
export const CALLS_IN_FLIGHT = 2;
/** Calls under way a run held to a daily cap alone may have: more than a budgeted run's, since a coding agent runs
 * subagents and side calls beside a long stream, and a cap is shared by many runs; still a bound on what one run
 * adds to the day before its next call can be refused, under the job's share of the gate's connections. */
export const CAPPED_CALLS_IN_FLIGHT = 6;

interface RunSpent {
  usd: number;
  /** Why the gate could not count one of the run's calls (the first such), or null. */
  uncounted: string | null;
  /** Why one of the run's calls may have cost more than it was counted at (the first such: MeteredCall `doubt`). */
  doubt: string | null;
  /** Held to a max_usd of its own: its usd matters after a restart (a run under a daily cap alone: only its doubt). */
  budgeted: boolean;
  inFlight: number;
  expires: number;
}

/** Each followed run's spending at `svc gate serve`, apart from its records (which the gate may let go), until its
 * credential expires; with a `file`, read once at start and written whole (atomically) when what a restart needs
 * changed (a budgeted run's usd, a run's first doubt or unpriced call), so a restart does not give a run its budget
 * again. Only runs with a budget, a doubt or an unpriced call are written: a file rewritten after every call of every
 * capped run cost 22 ms a call at 6,100 runs. */
export class RunSpend {
  private readonly runs = new Map<string, RunSpent>();
  private readonly file: string | null;

  constructor(file: string | null = null, now = Date.now()) {
    this.file = file;
    if (file !== null) this.load(file, now);
  }

  private load(file: string, now: number): void {
    const bad = (why: string): BadSettingError =>
      new BadSettingError(`SVC_GATE_STATE_DIR: ${file} ${why}; move it away to start with no run's spending`);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw bad(`cannot be read (${errorMessage(err).slice(0, 120)})`);
    }
    const value = tryParseJson(text);
    if (!isJsonObject(value) || !isJsonObject(value.runs)) throw bad('is not {"runs": {"<run>": {"usd", "expires"}}}');
    for (const [run, entry] of Object.entries(value.runs)) {
      const o = obj(entry);
      const { usd, expires } = o;
      if (typeof usd !== 'number' || !(usd >= 0) || !Number.isFinite(usd) || typeof expires !== 'number') {
        throw bad(`holds no spending for run ${JSON.stringify(run.slice(0, 60))}`);
      }
      if (expires <= now) continue;
      // Kept as written until its credential expires: it was written for its budget, doubt or unpriced call.
      const kept = { usd, uncounted: str(o.uncounted), doubt: str(o.doubt), budgeted: true, inFlight: 0, expires };
      this.runs.set(run, kept);
    }
  }

  of(run: string, expires: number, now = Date.now()): RunSpent {
    let entry = this.runs.get(run);
    if (entry) return entry;
    for (const [id, r] of this.runs) if (r.expires <= now && r.inFlight === 0) this.runs.delete(id);
    entry = { usd: 0, uncounted: null, doubt: null, budgeted: false, inFlight: 0, expires };
    this.runs.set(run, entry);
    return entry;
  }

  /** Counts the record's call, then writes the file if a restart needs it (which may throw: the count stays). */
  add(record: EgressRecord): void {
    const entry = record.run === undefined ? undefined : this.runs.get(record.run);
    const m = record.metered;
    if (!entry || !m) return;
    let changed = entry.budgeted && m.usd !== null && m.usd > 0;
    // A call of unknown usage has its bound's price (usage.ts): only a model without a row leaves it uncounted.
    if (m.usd !== null) entry.usd += m.usd;
    else if (entry.uncounted === null) {
      entry.uncounted = `model ${JSON.stringify(m.model ?? 'unnamed')} has no price`;
      changed = true;
    }
    if (m.doubt !== undefined && entry.doubt === null) {
      entry.doubt = m.doubt;
      changed = true;
    }
    if (this.file === null || !changed) return;
    const runs: Record<string, Omit<RunSpent, 'inFlight' | 'budgeted'>> = {};
    for (const [id, r] of this.runs) {
      if (!r.budgeted && r.uncounted === null && r.doubt === null) continue;
      runs[id] = { usd: r.usd, uncounted: r.uncounted, doubt: r.doubt, expires: r.expires };
    }
    writeFileAtomic(this.file, JSON.stringify({ runs }, null, 2) + '\n', 0o600);
  }
}
