// Waiting for the worker of an ended run to leave it: its last ship, then its pid's clear (run-context.ts leave).
// One rule for every command that must not write a run beside its worker; it signals no process.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { liveWorkerOf, type RunWorkers } from './proc-group.ts';
import { TERMINAL } from '../run-json.ts';
import { ConflictError } from '../errors.ts';

/** How long a command on an ended run (a resume, a verify, an --open-pr, `svc ship`) waits for its worker to leave:
 * twice a worker's last ship at the most (shipper.ts LAST_SHIP_MS). */
export const LAST_WORKER_WAIT_MS = 10_000;
const POLL_MS = 50;

/** What a run's state says of its workers and its status, as the caller reads it (null: no state to read). */
export type WorkersRead = () => (RunWorkers & { status: unknown }) | null;

/**
 * The pid of a worker still there (proc-group.ts liveWorkerOf) in the state `read` gives of a run of `repo`, else
 * null. One whose run has ended is leaving (it ships the run's end, then clears its pid): it is waited for, up to
 * `waitMs`. A running run's is answered at once: it may work for hours.
 */
export async function workerStillThere(read: WorkersRead, waitMs: number, repo: string): Promise<number | null> {
  const until = performance.now() + waitMs;
  for (;;) {
    const state = read();
    const pid = state === null ? null : liveWorkerOf(state, repo);
    const ended = typeof state?.status === 'string' && TERMINAL.has(state.status);
    if (pid === null || !ended || performance.now() >= until) return pid;
    await sleep(POLL_MS);
  }
}

/** The refusal of `action` (a verb: "resume", "open its pull request") on a run whose worker `pid` is still there. */
export function workerConflict(state: { run: string; status: string }, pid: number, action: string): ConflictError {
  return new ConflictError(`Run ${state.run} is ${state.status} but its worker (pid ${pid}) is still finishing: ` +
    `${action} once that has exited`);
}

/**
 * Refuses `action` on the state read right before the caller's first write when a worker holds the run (of `repo`):
 * one that came after the caller's wait (afterLastWorker), such as an --open-pr that recorded itself meanwhile. Without
 * it the caller would write the run over that worker's, and both would ship it. Asked under the run's take lock
 * (run-take.ts), so that none records itself between this read and the caller's own record.
 */
export function refuseHeldRun(
  state: RunWorkers & { run: string; status: string }, action: string, repo: string,
): void {
  const pid = liveWorkerOf(state, repo);
  if (pid !== null) throw workerConflict(state, pid, action);
}
