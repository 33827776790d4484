// The Run JSON of DESIGN §3 — the one shape a run has on the wire — with its status and verdict vocabularies.
// Imports only the typed readers, so the client (which must stay free of node:sqlite) shares it too.
import { countOrNull, figure, obj, oneOf, str } from './untrusted.ts';

/** DESIGN §3: both path segments of a run's address `<source>/<run>`. */
export const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export const RUN_STATUSES = ['queued', 'running', 'blocked', 'stopping', 'succeeded', 'failed', 'stopped'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** The statuses a run ends in (DESIGN §3): the one server-side list (the UI's is static/lib/run-status.js). */
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'stopped'] as const satisfies readonly RunStatus[];
/** The others: the run still owns a process or a worktree. */
export const ACTIVE_STATUSES = ['queued', 'running', 'blocked', 'stopping'] as const satisfies readonly RunStatus[];
export const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATUSES);
/** The statuses a run works in, no stop asked yet. */
export const LIVE: ReadonlySet<string> = new Set(['queued', 'running', 'blocked']);
/** What a resume moves a run on from (DESIGN §3): its runner's own transition starts there. */
export const RESUMABLE: ReadonlySet<string> = new Set(['stopped', 'failed']);

/** Whether a `run.status` event's data (untrusted) is its run's move out of a stop or failure: a resume. */
export function isResume(data: Record<string, unknown>): boolean {
  return RESUMABLE.has(str(data.from) ?? '') && LIVE.has(str(data.to) ?? '');
}
export const VERDICTS = ['verified', 'verified_with_gaps', 'not_verified'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** Times are ISO-8601 UTC strings. Engine-internal fields (repo_path, pid, extra, …) never appear here. */
export interface RunJson {
  source: string;
  run: string;
  repo: string | null;
  group_id: string;
  status: RunStatus;
  verdict: Verdict | null;
  brief: string | null;
  origin: string | null;
  provider: string | null;
  branch: string | null;
  pr_url: string | null;
  question: string | null;
  started_at: string;
  ended_at: string | null;
  updated_at: string;
  cost_usd: number | null;
  tokens_in: number | null;
  tokens_out: number | null;
  exit_code: number | null;
  error: string | null;
  /** Why a run that did not succeed ended (null while it runs and when it succeeded). */
  failure: RunFailure | null;
  /** What the agent itself reported (svc.cost lines, its CLI's usage lines); null when it reported nothing. */
  reported: CostFigures | null;
  /** What the egress gate metered (docs/gate.md "Metered cost"); when set, cost_usd and the tokens are these. */
  metered: MeteredCost | null;
  /** The run's OpenTelemetry trace; optional only so a state.json from before traces still types. */
  trace_id?: string | null;
}

export interface CostFigures {
  cost_usd: number | null;
  tokens_in: number | null;
  tokens_out: number | null;
}

export interface MeteredCost extends CostFigures {
  /** Model calls metered; of them, those whose model has no price, and those whose usage could not all be read
   * (counted at their bounds: docs/gate.md "Metered cost"). */
  calls: number;
  unpriced: number;
  unknown: number;
  /** Only when some were: calls counted at bounds their request could not set for certain (the count may be low). */
  doubtful?: number;
  /** CONNECT tunnels the run opened, whose TLS the gate does not read (a model call in one is not metered: a CLI logged
   * in to its vendor's account); 0 included. Absent from totals an older gate or svc wrote: they did not count them. */
  tunnels?: number;
}

/** Metered totals from JSON another process wrote (the shared gate's answer, a state.json): a field that is no
 * count is 0, a cost that is no figure null; null for none. */
export function readMetered(value: unknown): MeteredCost | null {
  if (value === null || value === undefined) return null;
  const o = obj(value);
  const count = (field: unknown): number => countOrNull(field) ?? 0;
  return {
    cost_usd: figure(o.cost_usd), tokens_in: count(o.tokens_in), tokens_out: count(o.tokens_out),
    calls: count(o.calls), unpriced: count(o.unpriced), unknown: count(o.unknown),
    ...(count(o.doubtful) > 0 ? { doubtful: count(o.doubtful) } : {}),
    ...(countOrNull(o.tunnels) !== null ? { tunnels: count(o.tunnels) } : {}),
  };
}

/** Every Run JSON key, in the order DESIGN §3 lists them (and every serializer writes them). */
export const RUN_JSON_FIELDS = [
  'source', 'run', 'repo', 'group_id', 'status', 'verdict', 'brief', 'origin', 'provider', 'branch', 'pr_url',
  'question', 'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error',
  'failure', 'reported', 'metered', 'trace_id',
] as const satisfies ReadonlyArray<keyof RunJson>;

// A run's page on the Control Plane as people reach it (SVC_PUBLIC_URL), for every link svc sends out.
export function runPageUrl(publicUrl: string, source: string, run: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/#/runs/${encodeURIComponent(source)}/${encodeURIComponent(run)}`;
}

// Failure classes (docs/engine.md "Why a run failed"): decided where the failure is known, never from its text.
/** infra: svc's side (sandbox, gate, checkout, disk, the Control Plane at start), the one class worth a retry as is. */
export const FAILURE_CLASSES = ['infra', 'config', 'agent', 'checks', 'policy', 'budget', 'limit', 'stopped'] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];
export interface RunFailure {
  class: FailureClass;
  /** One line for people: what failed; a limit names the limit, a stop who stopped it. */
  reason: string;
  /** Whether running it again unchanged may succeed (an infra failure). */
  retryable: boolean;
}

/** A reason is one line's worth: a git or forge error can run to kilobytes (the run's `error` keeps all of it). */
const REASON_CAP = 2000;

/** The failure of class `cls`: retryable exactly when it is svc's own infrastructure that failed. */
export function runFailure(cls: FailureClass, reason: string): RunFailure {
  const short = reason.length > REASON_CAP ? `${reason.slice(0, REASON_CAP - 1)}…` : reason;
  return { class: cls, reason: short, retryable: cls === 'infra' };
}

/** A failure from another process's output (typed checks only, never a method call); null unless well-formed. */
export function readFailure(value: unknown): RunFailure | null {
  const v = obj(value);
  const cls = oneOf(v.class, FAILURE_CLASSES);
  return cls === null || typeof v.reason !== 'string' ? null : runFailure(cls, v.reason);
}
