// Budgets on metered cost (docs/gate.md "Budgets"): a run's own (policy max_usd, raised by an answer) and the
// operator's caps per repository and per server per day, counted in a ledger every gate of the machine shares.
import { appendFileSync, closeSync, fstatSync, mkdirSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { isJsonObject } from '../json-value.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';
import { BadSettingError, errorMessage } from '../errors.ts';
import { writeFileAtomic } from '../atomic-write.ts';
import { orNull } from '../spawn/tree.ts';
import type { EgressRecord, MeteredCall } from './evidence.ts';
import type { MeteredCost } from '../run-json.ts';

export interface Reached {
  kind: 'run' | 'repository-day' | 'server-day';
  limit: number;
  spent: number;
  /** Why the budget cannot be kept though not reached: a call the gate could not count for certain. */
  uncountable?: string;
}

type Budget = 'run' | 'repoDay' | 'serverDay';
type Limits = Record<Budget, number | null>;

/** What the budget rule knows of a run: its metered cost, calls under way, and why one of its calls went uncounted
 * (a model with no price) or may have cost more than it was counted at (MeteredCall `doubt`), the first such. */
export interface RunCount {
  usd: number;
  uncounted: string | null;
  doubt: string | null;
  inFlight: number;
}

/** The first budget reached (run, then repository, then server), or null. */
export function reachedBudget(spent: Record<Budget, number>, limits: Limits): Reached | null {
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

/** What a run has spent against its own budget (max_usd), one rule for a run's own gate, the engine without one and
 * a pod's signer: the gate's metered cost alone when the gate saw and priced every model call of the run (it priced
 * one, left none unpriced or counted in doubt, and counted no CONNECT tunnel, whose TLS it does not read; totals an
 * older gate or svc wrote have no count of tunnels, so may miss a call); otherwise the larger of that and what the
 * agent reported, since each may then miss what the other sees (a CLI logged in to its vendor's account calls through
 * a tunnel; a free call metered at $0 must not hide a reported $5).
 * An agent's own estimate (claude's list price) never overrides a whole metered figure: the operator's price file
 * (a $0 row, a negotiated price) decides what the run spent. */
export function runSpent(
  cost: { metered?: MeteredCost | null; reported?: { cost_usd: number | null } | null },
): number {
  const m = cost.metered ?? null;
  // state.json is read back without a check of every figure: one that is not a finite number counts as unknown (0),
  // never as a NaN that no budget is ever reached by.
  const metered = Number.isFinite(m?.cost_usd) ? (m?.cost_usd as number) : null;
  const reported = Number.isFinite(cost.reported?.cost_usd) ? (cost.reported?.cost_usd as number) : 0;
  if (m !== null && metered !== null && m.unpriced === 0 && !m.doubtful && m.tunnels === 0) return metered;
  return Math.max(metered ?? 0, reported);
}

/** The one budget rule of a run's own gate and `svc gate serve` (docs/gate.md "Budgets"): the budget a run's next
 * model call is refused at, or null. An unpriced call, or one whose bounds its request could not set, leaves every
 * budget the run is held to unkept (a daily cap too: an unpriced call adds nothing to the day's count). A doubted call
 * counts at most INPUT_BOUND input and one answer of OUTPUT_BOUND (usage.ts): $39.60 at the built-in table's top
 * prices, so a day cap below that can be filled by one; the calls under way per run (holdCall) bound what a run adds
 * before its next call is refused. */
export function budgetHeld(run: RunCount, limits: Limits, day: { repoDay: number; serverDay: number }): Reached | null {
  const why = run.uncounted ?? (run.doubt ? `a model call may have cost more than its bounds (${run.doubt})` : null);
  if (why !== null && (limits.run !== null || limits.repoDay !== null || limits.serverDay !== null)) {
    const held: Reached = limits.run !== null ? { kind: 'run', limit: limits.run, spent: run.usd }
      : limits.repoDay !== null ? { kind: 'repository-day', limit: limits.repoDay, spent: day.repoDay }
        : { kind: 'server-day', limit: limits.serverDay ?? 0, spent: day.serverDay };
    return { ...held, uncountable: why };
  }
  return reachedBudget({ run: run.usd, ...day }, limits);
}

/** Adds a call to what the rule knows of its run; true when it was the run's first uncounted or doubted call. */
export function countCall(run: RunCount, m: MeteredCall): boolean {
  let first = false;
  // A call of unknown usage has its bound's price (usage.ts): only a model without a row leaves it uncounted.
  if (m.usd !== null) run.usd += m.usd;
  else if (run.uncounted === null) {
    run.uncounted = `model ${JSON.stringify(m.model ?? 'unnamed')} has no price`;
    first = true;
  }
  if (m.doubt !== undefined && run.doubt === null) {
    run.doubt = m.doubt;
    first = true;
  }
  return first;
}

/** Calls under way a budgeted run may have at a gate: what it can spend past its budget. */
const CALLS_IN_FLIGHT = 2;
/** Calls under way a run held to a daily cap alone may have: more than a budgeted run's, since a coding agent runs
 * subagents and side calls beside a long stream, and a cap is shared by many runs; still a bound on what one run
 * adds to the day before its next call can be refused, under the job's share of the gate's connections. */
const CAPPED_CALLS_IN_FLIGHT = 6;

/** A budgeted run's (or, under a daily cap, any run's) next model call is held to its calls under way: the admitted
 * call's release (counted once, however often called), or why it must wait (a 429). */
export function holdCall(run: RunCount, budgeted: boolean): (() => void) | string {
  if (run.inFlight >= (budgeted ? CALLS_IN_FLIGHT : CAPPED_CALLS_IN_FLIGHT)) {
    const bound = budgeted ? 'its budget\'s bound' : 'its bound under the daily cap';
    return `this run has ${run.inFlight} model calls under way (${bound})`;
  }
  run.inFlight += 1;
  // Once only, however the call ends: a second release would let the run past its calls in flight.
  let released = false;
  return () => {
    if (!released) run.inFlight -= 1;
    released = true;
  };
}

/** The gate's refusal, as a CLI shows it (`asked`: the engine asks to raise it; not on `svc gate serve`). */
export function refusalText(r: Reached, repo: string, asked = true): string {
  if (r.uncountable !== undefined) {
    return `${budgetName(r, repo)} cannot be kept: ${r.uncountable}, so the gate cannot count what the run spent; ` +
      (asked ? 'svc has paused the run and asked whether to go on' : 'the run stops here');
  }
  // A daily cap's amount is the day's spending of every run it counts (every repository's, for the server's): not
  // this run's to read, and the text is its evidence (the receipt's denials, which a pull request carries).
  const reached = `${budgetName(r, repo)} is reached${r.kind === 'run' ? ` (metered ${usd(r.spent)})` : ''}`;
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
    const fd = orNull(() => openSync(join(this.folder!, `${this.day}.jsonl`), 'r'));
    if (fd === null) return;
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

interface RunSpent extends RunCount {
  /** Held to a max_usd of its own: its usd matters after a restart (a run under a daily cap alone: only its doubt). */
  budgeted: boolean;
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
    const changed = countCall(entry, m) || (entry.budgeted && m.usd !== null && m.usd > 0);
    if (this.file === null || !changed) return;
    const runs: Record<string, Omit<RunSpent, 'inFlight' | 'budgeted'>> = {};
    for (const [id, r] of this.runs) {
      if (!r.budgeted && r.uncounted === null && r.doubt === null) continue;
      runs[id] = { usd: r.usd, uncounted: r.uncounted, doubt: r.doubt, expires: r.expires };
    }
    writeFileAtomic(this.file, JSON.stringify({ runs }, null, 2) + '\n', 0o600);
  }
}
