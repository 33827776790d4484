// How a job's `svc start` is launched and its run followed. The local child process is the default executor;
// others (e.g. a Kubernetes one) implement the same two calls and are picked by SVC_TRIGGER_EXECUTOR.
import { str } from '../untrusted.ts';
import { isValidSegment } from '../engine/ids.ts';

/** Address of a run as `svc start --detach` prints it: one JSON line `{"source","run"}`. */
export interface RunRef {
  source: string;
  run: string;
}

/** The parts of a run's final state.json a completion summary needs. */
export interface RunOutcome {
  status: 'succeeded' | 'failed' | 'stopped';
  verdict: string | null;
  pr_url: string | null;
  cost_usd: number | null;
  started_at: string | null;
  ended_at: string | null;
  error: string | null;
  /** Times the run's worker started it over after an infra failure before its agent ran. */
  infra_retries?: number;
}

export interface LaunchResult {
  exitCode: number | null;
  run: RunRef | null;
  /** Why the launch failed, one line, never containing secrets (the child has none). */
  error: string | null;
}

export interface ExecJob {
  id: string;
  /** The exact argv after `svc`, e.g. ['start', '--brief', '…', '--pr', '--detach']. */
  args: readonly string[];
  /** Passed to the run as SVC_ORIGIN. */
  origin?: string;
  /** The routed repository's checkout, or a managed one. */
  workdir: string;
  /** The served entry: its name becomes the run's `repo` (SVC_REPO_NAME); a pod clones its URL. */
  repo?: { name: string; clone: string | null };
  /** The job's span, which its run continues (SVC_TRACEPARENT). */
  traceparent?: string | null;
}

export interface FollowOptions {
  reattach: boolean;
  /** Where the job's launcher ran: its runs live under `<workdir>/.svc/runs/`. */
  workdir: string;
  /** Told each time the run starts or stops waiting for an answer (null), from the same read that sees it end. */
  onQuestion?: (question: string | null) => void;
}

export type AnswerResult = { ok: true } | { ok: false; reason: string };

/**
 * `launch` runs the launcher to its end (quick with `--detach`), reports a failed launch rather than throwing, and
 * puts no secret in its argv or environment. `follow` resolves with the run's final state; null when the run cannot
 * be found; 'aborted' when `signal` fires (shutdown: the job stays `running` and is re-attached later).
 */
export interface JobExecutor {
  launch(job: ExecJob): Promise<LaunchResult>;
  follow(run: RunRef, signal: AbortSignal, opts: FollowOptions): Promise<RunOutcome | null | 'aborted'>;
  /** Answers a blocked run as `svc answer --origin WHO` does; absent where it cannot reach the runs. */
  answer?(run: RunRef, text: string, workdir: string, origin: string): Promise<AnswerResult>;
}

export function questionOf(state: Record<string, unknown>): string | null {
  if (state.status !== 'blocked') return null;
  return typeof state.question === 'string' && state.question.trim() !== '' ? state.question : 'the run is blocked';
}

/** The last line of `text` that is a JSON object `pick` accepts (a launcher's run line, a signer's summary). */
export function lastJsonLine<T>(text: string, pick: (value: Record<string, unknown>) => T | null): T | null {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{'));
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const found = pick(JSON.parse(lines[i]!) as Record<string, unknown>);
      if (found) return found;
    } catch {
      // not JSON
    }
  }
  return null;
}

/** The last valid `{"source","run"}` line in launcher output. */
export function parseLaunchOutput(stdout: string): RunRef | null {
  return lastJsonLine(stdout, ({ source, run }) => (
    isValidSegment(source) && isValidSegment(run) ? { source, run } : null
  ));
}

/** The summary fields of a final run state (its state.json, or the signer's last line). */
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
