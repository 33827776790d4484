// The runs table's row, filter and key types and its failure columns, apart from the store so its callers (the
// engine's check of a run as ingest takes it too) need not import it.
import type { FailureClass, RunFailure, RunJson, RunStatus, Verdict } from '../run-json.ts';

/** A runs row: the Run JSON fields with times as unix ms, plus the internal columns that never leave the server. */
export interface RunRow
  extends Omit<RunJson, 'started_at' | 'ended_at' | 'updated_at' | 'failure' | 'reported' | 'metered'> {
  /** JSON texts. */
  reported: string | null;
  metered: string | null;
  started_at: number;
  ended_at: number | null;
  updated_at: number;
  repo_path: string | null;
  pid: number | null;
  extra: string | null;
  /** The Run JSON's `failure`, one column each, so the list can filter on the class. */
  failure_class: FailureClass | null;
  failure_reason: string | null;
  /** 1 or 0 (SQLite has no boolean); null with no failure. */
  failure_retryable: number | null;
}

/** What upsert takes: identity, status and start time are required; group_id defaults to the run id. */
export type RunInput = Partial<Omit<RunRow, 'source' | 'run' | 'status' | 'started_at'>> &
  Pick<RunRow, 'run' | 'status' | 'started_at'>;
export type RunPatch = Partial<Omit<RunRow, 'source' | 'run'>>;

/** The columns of a Run JSON `failure` (all null for none), for an upsert or a patch. */
export function failureColumns(
  failure: RunFailure | null,
): Pick<RunRow, 'failure_class' | 'failure_reason' | 'failure_retryable'> {
  return {
    failure_class: failure?.class ?? null,
    failure_reason: failure?.reason ?? null,
    failure_retryable: failure ? Number(failure.retryable) : null,
  };
}

export type RunKey = Pick<RunRow, 'started_at' | 'source' | 'run'>;

export interface RunFilter {
  /** null: runs that have none yet. */
  verdict?: Verdict | null;
  repo?: string;
  group_id?: string;
  status?: RunStatus;
  source?: string;
  failure_class?: FailureClass;
  /** since <= started_at < until, so adjacent windows never count a run twice. */
  since?: number;
  until?: number;
  /** Keyset cursor: rows strictly after this key, newest first. */
  after?: RunKey;
  limit: number;
}

export type DeleteOutcome = 'deleted' | 'not_found' | 'active';
