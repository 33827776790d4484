// What a shared gate keeps of each run's connections for its pod's signer (docs/gate.md "svc gate serve"): bounded,
// since a hostile agent can open connections without end.
import {
  newTally, tallyRecord, tallySummary, type EgressRecord, type EgressSummary, type EgressTally,
} from './evidence.ts';
import type { MeteredCost } from '../run-json.ts';

const RECORDS_PER_RUN = 250;
/** Distinct destinations, and distinct refusals, counted per run. */
const DESTINATIONS_PER_RUN = 250;
const RUNS_KEPT = 500;
// Runs let go whose ids are still remembered: one asked again is refused, never started afresh as a partial tally
// its signer would report as confined.
const EVICTED_KEPT = 50_000;
const NAME_MAX = 256;
const REASON_MAX = 300;

/** Totals exact even past the records kept (the first ones); `overflow`: `hosts`/`denials` do not name them all. */
type RunEgress = EgressSummary & {
  overflow: boolean;
  records: EgressRecord[];
  /** Every metered model call of the run added up; null when none was metered. */
  metered: MeteredCost | null;
};

/** What a run's pod has sent to `/_traces` and how many of its relays are under way. */
interface RelayShare {
  bytes: number;
  spans: number;
  inFlight: number;
}

type RunTally = EgressTally & Pick<RunEgress, 'overflow' | 'records' | 'metered'> & { relay: RelayShare };

/** At most `max` characters, in a string of its own: a V8 slice would keep its whole parent (a request head) alive. */
function own(text: string, max: number): string {
  return Buffer.from(text.slice(0, max), 'utf8').toString('utf8');
}

const ownOrNull = (text: string | null, max = NAME_MAX): string | null => (text === null ? null : own(text, max));

export function boundedRecord(r: EgressRecord): EgressRecord {
  return {
    ...r, host: own(r.host, NAME_MAX), rule: ownOrNull(r.rule), reason: ownOrNull(r.reason, REASON_MAX),
    address: ownOrNull(r.address), sni: ownOrNull(r.sni), method: ownOrNull(r.method), model: ownOrNull(r.model),
    ...(r.job !== undefined ? { job: own(r.job, NAME_MAX) } : {}),
    ...(r.run !== undefined ? { run: own(r.run, NAME_MAX) } : {}),
    ...(r.repo !== undefined ? { repo: own(r.repo, NAME_MAX) } : {}),
  };
}

export class RunRecords {
  readonly since = new Date().toISOString();
  private readonly runs = new Map<string, RunTally>();
  private readonly evicted = new Set<string>();

  /** The run's tally, now its most recently active; null for a run let go. */
  private tally(id: string): RunTally | null {
    if (this.evicted.has(id)) return null;
    let run = this.runs.get(id);
    if (run) this.runs.delete(id); // re-inserted below: the map's order is least recently active first
    else {
      run = { ...newTally(), overflow: false, records: [], metered: null, relay: { bytes: 0, spans: 0, inFlight: 0 } };
    }
    this.runs.set(id, run);
    if (this.runs.size > RUNS_KEPT) this.evict(this.runs.keys().next().value as string);
    return run;
  }

  add(record: EgressRecord): void {
    const run = record.run ? this.tally(record.run) : null;
    if (!run) return;
    if (run.records.length < RECORDS_PER_RUN) run.records.push(record);
    if (!tallyRecord(run, record, DESTINATIONS_PER_RUN)) run.overflow = true;
    if (record.metered) run.metered = addMetered(run.metered, record.metered);
  }

  /** A CONNECT tunnel `who`'s run opened (none on a run's own gate: the run's meter counts it). */
  addTunnel(who: { run: string } | null): void {
    const run = who ? this.tally(who.run) : null;
    if (run) run.metered = addTunnel(run.metered);
  }

  /** Null for a run let go: the gate relays nothing more for it. */
  relayShare(id: string): RelayShare | null {
    return this.tally(id)?.relay ?? null;
  }

  private evict(id: string): void {
    this.runs.delete(id);
    this.evicted.add(id);
    if (this.evicted.size > EVICTED_KEPT) this.evicted.delete(this.evicted.values().next().value as string);
  }

  of(id: string): { known: true; egress: RunEgress } | { known: false; evicted: boolean } {
    const run = this.runs.get(id);
    if (!run) return { known: false, evicted: this.evicted.has(id) };
    const { overflow, records, metered } = run;
    return { known: true, egress: { ...tallySummary(run), overflow, records, metered } };
  }
}

// The gate counts tunnels from the start: totals without `tunnels` are an older gate's or svc's (budgets.ts runSpent).
export const NOTHING_METERED: MeteredCost = {
  cost_usd: null, tokens_in: 0, tokens_out: 0, calls: 0, unpriced: 0, unknown: 0, tunnels: 0,
};

/** A run's metered totals with one more call: tokens in count cached input too; cost only of priced calls (a call
 * of unknown usage is priced at its bounds, so `unknown` counts calls also in the cost, `unpriced` those not;
 * `doubtful`, only once there is one, those whose bounds may be low). A call of unknown usage counted at $0 (one that
 * generated nothing, usage.ts) prices nothing: the cost stays null until a call is priced, so a free GET does not
 * make the run's cost a metered $0 in place of what the agent reported. */
export function addMetered(total: MeteredCost | null, call: NonNullable<EgressRecord['metered']>): MeteredCost {
  const t = total ?? NOTHING_METERED;
  const doubtful = (t.doubtful ?? 0) + (call.doubt !== undefined ? 1 : 0);
  return {
    cost_usd: call.usd === null || (call.unknown !== null && call.usd === 0) ? t.cost_usd
      : (t.cost_usd ?? 0) + call.usd,
    tokens_in: (t.tokens_in ?? 0) + call.tokens_in + call.cache_read + call.cache_write,
    tokens_out: (t.tokens_out ?? 0) + call.tokens_out,
    calls: t.calls + 1,
    unpriced: t.unpriced + (call.usd === null ? 1 : 0),
    unknown: t.unknown + (call.unknown !== null ? 1 : 0),
    ...(doubtful > 0 ? { doubtful } : {}),
    ...(t.tunnels !== undefined ? { tunnels: t.tunnels } : {}),
  };
}

/** A run's metered totals with one more CONNECT tunnel opened: what it carries the gate cannot read, so the metered
 * cost may miss a model call in it (budgets.ts runSpent). */
export function addTunnel(total: MeteredCost | null): MeteredCost {
  const t = total ?? NOTHING_METERED;
  return { ...t, tunnels: (t.tunnels ?? 0) + 1 };
}
