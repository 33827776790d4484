// Stops a run from outside its worker: identity-checked SIGTERM to its group, SIGKILL after the grace.
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync } from 'node:fs';
import { runDir } from './paths.ts';
import { openEventLog, tryReadState, writeState, type RunState } from './run-state.ts';
import { TERMINAL, runFailure } from '../run-json.ts';
import { isChildOf, isWorkerOf, signalGroup, terminateGroup, waitGroupGone } from './proc-group.ts';
import { STOP_GRACE_MS } from './run-context.ts';

/** `by` names who stopped it (`svc runs stop`, the Control Plane…): the stopped run's failure reason says so. */
export async function stopLocalRun(
  repo: string, run: string, graceMs = STOP_GRACE_MS, by = 'a stop request',
): Promise<RunState | null> {
  const dir = runDir(repo, run);
  if (!existsSync(dir)) return null;
  let state = tryReadState(dir);
  if (!state || TERMINAL.has(state.status)) return state;
  // A worker that has not recorded itself yet sees "stopping" when it starts and stops at once.
  if (!state.pid) {
    writeState(dir, { ...state, status: 'stopping', updated_at: new Date().toISOString() });
    for (let i = 0; i < 20 && !state?.pid && !TERMINAL.has(state?.status ?? 'queued'); i++) {
      await sleep(100);
      state = tryReadState(dir);
    }
    if (!state) return null;
  }
  if (state.pid) {
    const worker = { pid: state.pid, pgid: state.pgid ?? state.pid, proc_start: state.proc_start };
    // state.json is only a claim: the pid must still be our worker for this very run (its argv says so).
    const owner = isWorkerOf(run);
    // The worker stops its provider (SIGTERM, then SIGKILL after the grace) and records "stopped" itself.
    if (signalGroup(worker, 'SIGTERM', owner) && !(await waitGroupGone(worker.pgid, graceMs * 2 + 2_000))) {
      signalGroup(worker, 'SIGKILL', owner);
      await waitGroupGone(worker.pgid, 5_000);
    }
  }
  state = tryReadState(dir) ?? state;
  if (state.child) await terminateGroup(state.child, graceMs, isChildOf(run));
  const failure = runFailure('stopped', `stopped by ${by}`);
  if (!TERMINAL.has(state.status)) {
    const from = state.status;
    const now = new Date().toISOString();
    state = {
      ...state, status: 'stopped', ended_at: state.ended_at ?? now, updated_at: now,
      question: null, child: null, pid: null, failure,
    };
    writeState(dir, state);
    openEventLog(dir).append('run.status', { from, to: 'stopped' });
  } else if (state.status === 'stopped' && state.failure?.class === 'stopped') {
    // The worker knew only the signal it got; this stopper knows who sent it.
    state = { ...state, failure, updated_at: new Date().toISOString() };
    writeState(dir, state);
  }
  return state;
}
