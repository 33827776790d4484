// How a job's `svc start` is launched and its run followed. The local child process is the default executor;
// others (e.g. a Kubernetes one) implement the same two calls and are picked by SVC_TRIGGER_EXECUTOR.
import { obj, str, tryParseJson } from '../untrusted.ts';
import { isValidSegment } from '../engine/ids.ts';
import { isIssueReference, mayFetchIssue } from '../engine/spec.ts';
import type { RunRef } from '../client/types.ts';
import type { ProcIdentity } from '../engine/proc-group.ts';

/** What a completion summary needs of a run's final state. */
export interface RunOutcome {
  status: 'succeeded' | 'failed' | 'stopped';
  verdict: string | null;
  pr_url: string | null;
  cost_usd: number | null;
  started_at: string | null;
  ended_at: string | null;
  error: string | null;
  infra_retries?: number;
}

export interface LaunchResult {
  exitCode: number | null;
  run: RunRef | null;
  /** One line, never holding a secret (the child has none). */
  error: string | null;
}

export interface ExecJob {
  id: string;
  /** The run id the server chose and recorded before the launch (`--run-id`): a new one, which no webhook names. */
  run: string;
  /** The argv after `svc`, e.g. ['start', '--brief', '…', '--pr', '--detach']. */
  args: readonly string[];
  /** SVC_ORIGIN. */
  origin?: string;
  workdir: string;
  /** Its name becomes the run's `repo` (SVC_REPO_NAME); a pod clones its URL. */
  repo?: { name: string; clone: string | null };
  /** SVC_TRACEPARENT: the run continues the job's span. */
  traceparent?: string | null;
  /** Told the launcher's process identity once it started, for a restart to end it (an executor of processes). */
  onLauncher?: (launcher: ProcIdentity) => void;
}

/**
 * Whether a job's run may fetch an issue with `tracker`'s credential, so is handed it (DESIGN §7a): its origin may
 * (engine/spec.ts), and its input, not forced to a brief, is such an issue's reference. An errtrack alert's brief
 * ("Fix errtrack …") and a /jobs brief (`--brief`) never are.
 */
export function jobMayFetchIssue(tracker: 'errtrack' | 'trackera', job: Pick<ExecJob, 'origin' | 'args'>): boolean {
  if (job.origin === undefined || !mayFetchIssue(tracker, job.origin) || job.args.includes('--brief')) return false;
  return job.args.some((arg) => isIssueReference(tracker, arg));
}

/**
 * A job never works in the served checkout itself: without --pr it gets --worktree, a checkout of its own, so jobs
 * of one repository run side by side and none waits on a run blocked on a question (docs/trigger.md, "Jobs").
 */
export function isolatedArgs(args: readonly string[]): string[] {
  return args.includes('--pr') || args.includes('--worktree') ? [...args] : [...args, '--worktree'];
}

export interface FollowOptions {
  reattach: boolean;
  /**
   * Re-attached to the run a launch the server did not see end was given; `launcher`, that launch's process, is ended
   * first (unknown: it may be making the run still).
   */
  launching?: { launcher: ProcIdentity | null };
  /** Where the launcher ran: its runs are under `<workdir>/.svc/runs/`. */
  workdir: string;
  /** Told each time the run starts or stops (null) waiting for an answer, from the same read that sees it end. */
  onQuestion?: (question: string | null) => void;
}

/** `reason` is a fixed text the origin may be told; `detail`, what svc said, is for the server's log only. */
export type AnswerResult = { ok: true } | { ok: false; reason: string; detail: string };

/**
 * `launch` runs the launcher to its end (quick with `--detach`), reports a failed launch rather than throwing and
 * puts no secret in argv or environment. `follow` gives
 * null for a run it cannot find, 'aborted' on shutdown (the job stays `running`, re-attached later).
 */
export interface JobExecutor {
  /** The `source` of the runs it starts (their launchers' SVC_SOURCE). */
  source: string;
  launch(job: ExecJob): Promise<LaunchResult>;
  follow(run: RunRef, signal: AbortSignal, opts: FollowOptions): Promise<RunOutcome | null | 'aborted'>;
  /** Answers a blocked run as `svc answer --origin WHO` does; absent where it cannot reach the runs. */
  answer?(run: RunRef, text: string, workdir: string, origin: string): Promise<AnswerResult>;
}

export function questionOf(state: Record<string, unknown>): string | null {
  if (state.status !== 'blocked') return null;
  return typeof state.question === 'string' && state.question.trim() !== '' ? state.question : 'the run is blocked';
}

/** As `svc start --detach` prints it: one JSON line `{"source","run"}` (the last such line of `stdout`). */
export function parseLaunchOutput(stdout: string): RunRef | null {
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{'));
  for (let i = lines.length - 1; i >= 0; i--) {
    const { source, run } = obj(tryParseJson(lines[i]!));
    if (isValidSegment(source) && isValidSegment(run)) return { source, run };
  }
  return null;
}

/** From a final state.json or the signer's outcome (its termination message). */
export function outcomeFromState(state: Record<string, unknown>): RunOutcome | null {
  const status = state.status;
  if (status !== 'succeeded' && status !== 'failed' && status !== 'stopped') return null;
  return {
    status,
    verdict: str(state.verdict),
    pr_url: str(state.pr_url),
    cost_usd: typeof state.cost_usd === 'number' ? state.cost_usd : null,
    started_at: str(state.started_at),
    ended_at: str(state.ended_at),
    error: str(state.error),
    infra_retries: Number.isSafeInteger(state.infra_retries) && (state.infra_retries as number) > 0
      ? state.infra_retries as number : 0,
  };
}
