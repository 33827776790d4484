// The Run JSON of DESIGN §3 — the one shape a run has on the wire — with its status and verdict vocabularies.
// Imports nothing, so the engine, the Control Plane and the client (which must stay free of node:sqlite) all share it.

export const RUN_STATUSES = ['queued', 'running', 'blocked', 'stopping', 'succeeded', 'failed', 'stopped'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** The statuses a run ends in (DESIGN §3): the one server-side list (the UI's is static/lib/run-status.js). */
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'stopped'] as const satisfies readonly RunStatus[];
/** The others: the run still owns a process or a worktree. */
export const ACTIVE_STATUSES = ['queued', 'running', 'blocked', 'stopping'] as const satisfies readonly RunStatus[];
export const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATUSES);
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
}

/** Every Run JSON key, in the order DESIGN §3 lists them (and every serializer writes them). */
export const RUN_JSON_FIELDS = [
  'source', 'run', 'repo', 'group_id', 'status', 'verdict', 'brief', 'origin', 'provider', 'branch', 'pr_url',
  'question', 'started_at', 'ended_at', 'updated_at', 'cost_usd', 'tokens_in', 'tokens_out', 'exit_code', 'error',
] as const satisfies ReadonlyArray<keyof RunJson>;

// Where a person looks at a run: its page on the Control Plane as people reach it (SVC_PUBLIC_URL, vetted by whoever
// reads it never to be a loopback address), for every link svc sends out (summaries, comments, PR bodies).
export function runPageUrl(publicUrl: string, source: string, run: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/#/runs/${encodeURIComponent(source)}/${encodeURIComponent(run)}`;
}
