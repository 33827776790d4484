// How a job ends: its status, its error, and the summary its reply will carry, written in one place for every way a
// job can end (its run's outcome, a launch that failed, a restart that lost it, a crash of the job loop).
import type { TriggerStores } from '../db/trigger-stores.ts';
import type { JobRow } from '../db/trigger-jobs-store.ts';
import type { RunOutcome, RunRef } from './executor.ts';
import { buildSummaryParts, plainSummary } from './summary.ts';
import type { Logger } from '../log.ts';

export type JobEnd = 'succeeded' | 'failed' | 'interrupted';

export interface JobFinishDeps {
  stores: TriggerStores;
  log: Logger;
  clock: () => number;
  controlUrl: string | undefined;
}

export interface JobFinish {
  status: JobEnd;
  run: RunRef | null;
  outcome: RunOutcome | null;
  exitCode: number | null;
  error: string | null;
}

/** The job's status and error for its run's final outcome: only a succeeded run makes a succeeded job. */
export function jobEndOf(outcome: RunOutcome): { status: JobEnd; error: string | null } {
  const status = outcome.status === 'succeeded' ? 'succeeded' : 'failed';
  const error = outcome.status === 'stopped' ? 'run stopped'
    : outcome.status === 'failed' ? (outcome.error ?? 'run failed')
    : null;
  return { status, error };
}

/** Records the job's end and its summary (plain text and the parts each channel renders). */
export function finishJob(deps: JobFinishDeps, job: JobRow, end: JobFinish): void {
  const { status, run, outcome, exitCode, error } = end;
  const now = deps.clock();
  const startedMs = outcome?.started_at ? Date.parse(outcome.started_at) : (job.started_at ?? now);
  const endedMs = outcome?.ended_at ? Date.parse(outcome.ended_at) : now;
  const parts = buildSummaryParts({
    jobId: job.id, status, run, outcome, durationMs: endedMs - startedMs, error, controlUrl: deps.controlUrl,
  });
  const summary = plainSummary(parts);
  const summary_parts = JSON.stringify(parts);
  deps.stores.jobs.finish(job.id, { status, finished_at: now, exit_code: exitCode, summary, summary_parts, error });
  deps.log.info('job finished', { job_id: job.id, status, run: run ? `${run.source}/${run.run}` : null });
}
