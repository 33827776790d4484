// Waiting for the worker of an ended run to leave it (its last ship, then its pid's clear: run-context.ts leave), or
// for `svc ship` to end its ship of it. One rule for every command that must not write a run beside either; it signals
// no process.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { liveWorkerOf, type RunWorkers } from './proc-group.ts';
import { TERMINAL } from '../run-json.ts';
import { ConflictError } from '../errors.ts';
import { shipperOf, type RunHolder } from './ship-hold.ts';

/** How long a command on an ended run (a resume, a verify, an --open-pr, `svc ship`) waits for its worker to leave:
 * twice a worker's last ship at the most (shipper.ts LAST_SHIP_MS). */
export const LAST_WORKER_WAIT_MS = 10_000;
const POLL_MS = 50;

/** What a run's state says of its workers and its status, as the caller reads it (null: no state to read). */
type WorkersRead = () => (RunWorkers & { status: unknown }) | null;

/**
 * Who holds a run of `repo` in `dir`: a worker still there in `state` (proc-group.ts liveWorkerOf), else a process
 * shipping it (ship-hold.ts), else null.
 */
export function holderOf(state: RunWorkers, repo: string, dir: string): RunHolder | null {
  const worker = liveWorkerOf(state, repo);
  if (worker !== null) return { pid: worker, shipping: false };
  const shipper = shipperOf(dir);
  return shipper === null ? null : { pid: shipper, shipping: true };
}

/**
 * Who still holds the run of `repo` in `dir` (holderOf), in the state `read` gives of it, else null. A holder of an
 * ended run is leaving (a worker ships the run's end, then clears its pid; a shipper ends its ship): it is waited for,
 * up to `waitMs`. A running run's is answered at once: it may work for hours.
 */
export async function workerStillThere(
  read: WorkersRead, waitMs: number, repo: string, dir: string,
): Promise<RunHolder | null> {
  const until = performance.now() + waitMs;
  for (;;) {
    const state = read();
    const holder = state === null ? null : holderOf(state, repo, dir);
    const ended = typeof state?.status === 'string' && TERMINAL.has(state.status);
    if (holder === null || !ended || performance.now() >= until) return holder;
    await sleep(POLL_MS);
  }
}

/** The refusal of `action` (a verb: "resume", "open its pull request") on a run `holder` still holds. */
export function workerConflict(
  state: { run: string; status: string }, holder: RunHolder, action: string,
): ConflictError {
  const still = holder.shipping
    ? `svc ship (pid ${holder.pid}) is still sending it: ${action} once that has ended`
    : `its worker (pid ${holder.pid}) is still finishing: ${action} once that has exited`;
  return new ConflictError(`Run ${state.run} is ${state.status} but ${still}`);
}

/**
 * Refuses `action` on the state read right before the caller's first write when a worker, or a shipper, holds the run
 * (of `repo`, in `dir`): one that came after the caller's wait (afterLastWorker), such as an --open-pr that recorded
 * itself meanwhile. Without it the caller would write the run over that worker's, and both would ship it. Asked under
 * the run's take lock (run-take.ts), so that none records itself between this read and the caller's own record.
 */
export function refuseHeldRun(
  state: RunWorkers & { run: string; status: string }, action: string, repo: string, dir: string,
): void {
  const holder = holderOf(state, repo, dir);
  if (holder !== null) throw workerConflict(state, holder, action);
}
