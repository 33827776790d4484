// What a shared gate keeps of each run's connections, so the run's pod signer can ask for them (GET
// /_job/<credential>/_egress) and put a network section the gate itself vouches for in the receipt. Bounded: a hostile
// agent can open connections without end, so each run keeps its first records and exact totals, and the gate keeps
// the most recent runs only.
import type { EgressRecord } from './evidence.ts';

const RECORDS_PER_RUN = 5_000;
const RUNS_KEPT = 500;

export interface RunEgress {
  /** Every connection the run made, and how many were denied (exact, even past the records kept). */
  connections: number;
  denied: number;
  records: EgressRecord[];
}

export class RunRecords {
  private readonly runs = new Map<string, RunEgress>();

  add(record: EgressRecord): void {
    if (!record.run) return;
    let run = this.runs.get(record.run);
    if (!run) {
      run = { connections: 0, denied: 0, records: [] };
      this.runs.set(record.run, run);
      if (this.runs.size > RUNS_KEPT) this.runs.delete(this.runs.keys().next().value as string);
    }
    run.connections += 1;
    if (record.decision === 'denied') run.denied += 1;
    if (run.records.length < RECORDS_PER_RUN) run.records.push(record);
  }

  of(run: string): RunEgress {
    return this.runs.get(run) ?? { connections: 0, denied: 0, records: [] };
  }
}
