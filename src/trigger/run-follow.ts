// Following a job's run to its end: what a run's state says (its outcome, its question), which every executor reads,
// and the local executor's watch of a run's state.json, which ends a lost launch's launcher and has a dead worker's
// run ended. It starts no svc itself: the launcher's `svc start --stop` is the executor's (`recordEnd`).
import { readFile } from 'node:fs/promises';
import { watch } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { orNull } from '../spawn/tree.ts';
import {
  isLauncherOf, noWorkerComing, signalGroup, waitGroupGone, workerAlive, type OwnerCheck,
} from '../engine/proc-group.ts';
import { procStart, type ProcIdentity } from '../proc-stat.ts';
import type { Logger } from '../log.ts';
import { objOrNull, positiveInt, str } from '../untrusted.ts';
import { isValidSegment } from '../engine/ids.ts';
import type { RunRef } from '../client/types.ts';

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

/**
 * A lost launch whose launcher is known gone (identity-checked) and that left no state.json for its run: the launcher
 * writes it before it starts the worker, so none exists and no agent ran. The job may start over.
 */
export const UNLAUNCHED = 'unlaunched';
export type Unlaunched = typeof UNLAUNCHED;

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

export function questionOf(state: Record<string, unknown>): string | null {
  if (state.status !== 'blocked') return null;
  return typeof state.question === 'string' && state.question.trim() !== '' ? state.question : 'the run is blocked';
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
    infra_retries: positiveInt(state.infra_retries) ?? 0,
  };
}

/** For a freshly launched run to write its first state.json. */
const MISSING_GRACE_MS = 60_000;

/** What the local executor lends its watch: how often it reads, its log, and the stop of a dead worker's run. */
interface LocalFollow {
  pollMs: number;
  log: Logger;
  recordEnd: (run: RunRef, workdir: string, signal: AbortSignal) => Promise<void>;
}

export async function followLocalRun(
  run: RunRef, signal: AbortSignal, f: FollowOptions, local: LocalFollow,
): Promise<RunOutcome | null | 'aborted' | Unlaunched> {
  const { pollMs, log, recordEnd } = local;
  if (!isValidSegment(run.run)) return null;
  const path = join(f.workdir, '.svc', 'runs', run.run, 'state.json');
  const started = Date.now();
  // A watch on the run's folder sees each state.json renamed into place at once; the poll covers a missing folder.
  let wake = new AbortController();
  // undefined until the first read, which is told either way (the notifier drops a question it already posted).
  let asked: string | null | undefined;
  const watcher = orNull(() => watch(dirname(path), (_event, name) => name === 'state.json' && wake.abort())
    .on('error', () => {}));
  // A launch the server lost: its launcher is ended first (never the worker it started, a group of its own), so what
  // it left is all there is, and a run it made that never gets a worker is ended as a dead worker's is.
  const lost = f.launching?.launcher ?? null;
  try {
    // Read from the job's row: signalled only while its leader is still this run's launcher (its argv says so).
    const gone = lost !== null && await endGroup(lost, isLauncherOf(run.run));
    if (lost && !gone) {
      // Still the process recorded, yet not this run's launcher by its argv or user: never signalled, and said.
      log.warn('a lost launch\'s recorded launcher is left running: it is not `svc start … --run-id <run>`', {
        pid: lost.pid, run: `${run.source}/${run.run}`,
      });
    }
    // Known gone only by its start time: without one a reused pid could pass for it. A run with a state.json may
    // have a worker not yet recorded in it, so it is followed as any other (never started over).
    if (gone && lost.proc_start !== null && await readState(path) === 'missing') return UNLAUNCHED;
    for (;;) {
      if (signal.aborted) return 'aborted';
      const state = await readState(path);
      if (state === 'missing') {
        // On re-attach a missing state means the run is gone, unless a launch that may still be going makes it: one
        // whose launcher the server never recorded (its row write failed), so never ended, gets the grace.
        const mayCome = !f.reattach || (f.launching && !lost);
        if (!mayCome || Date.now() - started > MISSING_GRACE_MS) return null;
      } else if (state) {
        const outcome = outcomeFromState(state)
          ?? await deadWorkerOutcome(path, state, () => recordEnd(run, f.workdir, signal));
        // Shutting down: the job is re-attached on restart, which finds the end this stop wrote (or stops the run).
        if (signal.aborted) return 'aborted';
        if (outcome) return outcome;
        const question = questionOf(state);
        if (question !== asked) f.onQuestion?.(question);
        asked = question;
      }
      try {
        await sleep(pollMs, undefined, { signal: AbortSignal.any([signal, wake.signal]) });
      } catch {
        if (signal.aborted) return 'aborted';
        wake = new AbortController();
      }
    }
  } finally {
    watcher?.close();
  }
}

/**
 * SIGTERM to a group we started, SIGKILL 5 s on if it is still there; resolves once it is gone. `owner` proves an
 * identity read from storage before the SIGTERM; the group it let through is ours for the SIGKILL. False when its
 * leader is still the process recorded but `owner` refused it: it is left running.
 */
async function endGroup(group: ProcIdentity, owner: OwnerCheck): Promise<boolean> {
  if (!signalGroup(group, 'SIGTERM', owner)) {
    return group.proc_start === null || procStart(group.pid) !== group.proc_start;
  }
  if (await waitGroupGone(group.pgid, 5_000)) return true;
  signalGroup(group, 'SIGKILL');
  await waitGroupGone(group.pgid, 5_000);
  return true;
}

/**
 * A run whose recorded worker is gone while its state says it is not over (killed, the machine restarted) never ends
 * by itself: it ends failed. Read again first: a worker that ended its run exits right after saying so. After
 * `recordEnd`, what that stop wrote (the run's cost, its end), or what a person's stop that came first did.
 * A run with no worker recorded gets none once its state is older than the grace a new run has, its launcher ended
 * or not recorded (a second restart, a launcher whose record failed): `svc start --stop` ends it as a dead worker's.
 */
async function deadWorkerOutcome(
  path: string, state: Record<string, unknown>, recordEnd: () => Promise<void>,
): Promise<RunOutcome | null> {
  const { pid, proc_start: procStart } = state;
  if (!noWorkerComing(state, Date.now()) &&
    (typeof pid !== 'number' || typeof procStart !== 'string' || workerAlive({ pid, proc_start: procStart }))) {
    return null;
  }
  const ended = await endedIn(path);
  if (ended) return ended;
  await recordEnd();
  const outcome = await endedIn(path) ?? outcomeFromState({ ...state, status: 'failed' })!;
  return outcome.status === 'failed' ? { ...outcome, error: 'the run\'s worker died' } : outcome;
}

async function endedIn(path: string): Promise<RunOutcome | null> {
  const state = await readState(path);
  return state && state !== 'missing' ? outcomeFromState(state) : null;
}

/** A half-written or unreadable state.json reads as null, "not yet". */
async function readState(path: string): Promise<Record<string, unknown> | 'missing' | null> {
  try {
    return objOrNull(JSON.parse(await readFile(path, 'utf8')));
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : null;
  }
}
