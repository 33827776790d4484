// What a shared gate keeps of each run's connections, for the run's pod signer (docs/gate.md "svc gate serve"):
// bounded, since a hostile agent can open connections without end, and never answering with a partial record set.
import { sortedTally, tallyRecord, type EgressRecord, type EgressSummary, type EgressTally } from './evidence.ts';
import type { MeteredCost } from '../run-json.ts';

const RECORDS_PER_RUN = 250;
/** Distinct (host, port) destinations, and distinct refusals, counted per run. */
const DESTINATIONS_PER_RUN = 250;
const RUNS_KEPT = 500;
/** Runs let go whose ids are still remembered (an id is a few dozen bytes). */
const EVICTED_KEPT = 50_000;
/** Longest host, rule or server name kept (a host name is at most 253), and longest reason. */
const NAME_MAX = 256;
const REASON_MAX = 300;

/** Totals exact even past the records kept; each host and denial listed exact. */
export type RunEgress = Pick<EgressSummary, 'connections' | 'denied' | 'hosts' | 'denials'> & {
  /** More distinct destinations or refusals came than are counted: `hosts`/`denials` do not name them all. */
  overflow: boolean;
  /** The run's first records, as evidence; `connections` says how many there were in all. */
  records: EgressRecord[];
  /** Every metered model call of the run added up (docs/gate.md "Metered cost"); null when none was metered. */
  metered: MeteredCost | null;
};

/** What a run's pod has sent to `/_traces` (bytes read, spans relayed) and how many of its relays are under way. */
export interface RelayShare {
  bytes: number;
  spans: number;
  inFlight: number;
}

type RunTally = EgressTally & Pick<RunEgress, 'connections' | 'denied' | 'overflow' | 'records' | 'metered'> & {
  relay: RelayShare;
};

/**
 * At most `max` characters, in a string of its own: a slice of a longer string can keep all of it alive (V8 shares
 * the parent), so a record kept for a run's lifetime could hold a whole request head.
 */
function own(text: string, max: number): string {
  return Buffer.from(text.slice(0, max), 'utf8').toString('utf8');
}

const ownOrNull = (text: string | null, max = NAME_MAX): string | null => (text === null ? null : own(text, max));

/** The record with its text fields bounded and copied: what the gate keeps in memory and writes out. */
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
  /** Since when this gate has seen every connection (its start). */
  readonly since = new Date().toISOString();
  private readonly runs = new Map<string, RunTally>();
  private readonly evicted = new Set<string>();

  /** The run's tally, now its most recently active (made if new); null for a run let go. */
  private tally(id: string): RunTally | null {
    if (this.evicted.has(id)) return null;
    let run = this.runs.get(id);
    if (run) this.runs.delete(id); // re-inserted below: the map's order is least recently active first
    else {
      run = {
        connections: 0, denied: 0, hosts: new Map(), denials: new Map(), overflow: false, records: [], metered: null,
        relay: { bytes: 0, spans: 0, inFlight: 0 },
      };
    }
    this.runs.set(id, run);
    if (this.runs.size > RUNS_KEPT) this.evict(this.runs.keys().next().value as string);
    return run;
  }

  /** Counts a record the gate has already bounded (boundedRecord). */
  add(record: EgressRecord): void {
    const run = record.run ? this.tally(record.run) : null;
    if (!run) return;
    run.connections += 1;
    if (record.decision === 'denied') run.denied += 1;
    if (run.records.length < RECORDS_PER_RUN) run.records.push(record);
    if (!tallyRecord(run, record, DESTINATIONS_PER_RUN)) run.overflow = true;
    if (record.metered) run.metered = addMetered(run.metered, record.metered);
  }

  /** What the run's pod has relayed of its spans; null for a run let go (the gate relays nothing more for it). */
  relayShare(id: string): RelayShare | null {
    return this.tally(id)?.relay ?? null;
  }

  private evict(id: string): void {
    this.runs.delete(id);
    this.evicted.add(id);
    if (this.evicted.size > EVICTED_KEPT) this.evicted.delete(this.evicted.values().next().value as string);
  }

  /** The run's egress; unknown when this gate never saw it (since its start) or let it go. */
  of(id: string): { known: true; egress: RunEgress } | { known: false; evicted: boolean } {
    const run = this.runs.get(id);
    if (!run) return { known: false, evicted: this.evicted.has(id) };
    const { connections, denied, overflow, records, metered } = run;
    return { known: true, egress: { connections, denied, overflow, records, metered, ...sortedTally(run) } };
  }
}

/** A run's metered totals with one more call: tokens in count cached input too; cost only of priced calls. */
export function addMetered(total: MeteredCost | null, call: NonNullable<EgressRecord['metered']>): MeteredCost {
  const t = total ?? { cost_usd: null, tokens_in: 0, tokens_out: 0, calls: 0, unpriced: 0, unknown: 0 };
  return {
    cost_usd: call.usd === null ? t.cost_usd : (t.cost_usd ?? 0) + call.usd,
    tokens_in: (t.tokens_in ?? 0) + call.tokens_in + call.cache_read + call.cache_write,
    tokens_out: (t.tokens_out ?? 0) + call.tokens_out,
    calls: t.calls + 1,
    unpriced: t.unpriced + (call.unknown === null && call.usd === null ? 1 : 0),
    unknown: t.unknown + (call.unknown !== null ? 1 : 0),
  };
}
