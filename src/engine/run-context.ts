// The worker's handle on one run: state rewrites, events, artifacts, stop requests and shipping, in one place; and
// the stop of a run from outside its worker.
import { existsSync } from 'node:fs';
import { hash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  appendEvent, openEventLog, readState, signsLater, tryReadState, writeState, type RunState,
} from './run-state.ts';
import { TERMINAL, runFailure, type CostFigures, type MeteredCost, type RunStatus } from '../run-json.ts';
import { artifactsDir, runDir } from './paths.ts';
import {
  endGroupNow, isWorkerOf, killNamespace, noWorkerComing, signalGroup, terminateGroup, waitGroupGone, workerAlive,
  type OwnerCheck,
} from './proc-group.ts';
import { procStart, type ProcIdentity } from '../proc-stat.ts';
import { procList } from '../spawn/tree.ts';
import type { GroupWatch } from './git-group.ts';
import { createShipLoop, createShipper, type ControlItem } from './shipper.ts';
import { markPending } from './ship-pending.ts';
import { addUsage, createOutputReader, NO_USAGE, svcCost, type Usage } from './providers.ts';
import { keptLocal, openRunFolder, readPlainIn } from './plain-tree.ts';
import { objOrNull, tryParseJson } from '../untrusted.ts';
import { takeAnswer, answerOf, type Answer } from './answers.ts';
import { makePlainDirsIn, openRunDir, replaceNoFollowIn, UnsafePathError, withDir } from './safe-fs.ts';
import { settingChoice } from '../settings-registry.ts';
import { logWithoutSecrets, redactSecrets } from './text.ts';

const STOP_GRACE_MS = 5_000;

export type RunContext = ReturnType<typeof openRunContext>;

/** The cost fields after a change to either figure: the gate's metered cost once it priced a call, else the agent's
 * report (docs/gate.md "Metered cost"); both are kept. */
export function withCost(state: RunState, change: { reported?: CostFigures; metered?: MeteredCost }) {
  const given = change.reported;
  const reported = given === undefined ? state.reported ?? null
    : given.cost_usd === null && given.tokens_in === null && given.tokens_out === null ? null : given;
  const metered = change.metered ?? state.metered ?? null;
  const shown = metered !== null && metered.cost_usd !== null ? metered : reported ?? metered;
  return {
    reported, metered,
    cost_usd: shown?.cost_usd ?? null, tokens_in: shown?.tokens_in ?? null, tokens_out: shown?.tokens_out ?? null,
  };
}

/**
 * `ship`: whether the run goes to the Control Plane as it runs; by default unless SVC_SHIP is 0 here or was when the
 * run was made (its plan's `local`: keptLocal). `control`: requests an earlier batch of this run took before the
 * context opened (a pod signer's first), acted on as its own batches'.
 * `deletionStops`: whether the run's deletion on the Control Plane stops it; by default only in a pod's run container.
 */
export function openRunContext(
  dir: string, env: NodeJS.ProcessEnv,
  opts: {
    ship?: boolean; say?: (t: string) => void; control?: readonly ControlItem[]; deletionStops?: boolean;
    /** Event seqs go after this one too (a pod's signer: what the Control Plane stored before it). */
    seqAfter?: number;
    /** The budget of the last ship as the context closes (shipper.ts createShipLoop); null: none. */
    lastShipMs?: number | null;
  },
) {
  const state = readState(dir);
  let stoppedBy: string | null = null;
  // Only a child this process started: state.child may still be what state.json said (untrusted) at start.
  let child: ProcIdentity | null = null;

  // Requests the Control Plane could not deliver on disk come in this run's own ingest responses.
  const answers: Answer[] = [];
  function onControl(item: ControlItem): void {
    if (item.run !== state.run) return;
    if (item.action === 'stop') ctx.requestStop('a stop request through the Control Plane');
    if (item.action === 'deleted') onDeleted();
    if (item.action === 'answer' && typeof item.answer === 'string') answers.push(answerOf(item.answer, item.by));
  }

  // A pod's run the Control Plane answers "deleted" was ended there without it (stopped before its run container's
  // first batch) and its stop request went with its row, so its run container and signer take the deletion as the
  // stop. Any other worker's run may have been deleted before this attempt began (a resume, a verify, a new run
  // reusing a deleted run's id): it goes on here, and is no longer shipped.
  let deletionSaid = false;
  function onDeleted(): void {
    if (opts.deletionStops ?? signsLater(env)) {
      ctx.requestStop('its deletion on the Control Plane');
    } else if (!deletionSaid) {
      deletionSaid = true;
      ctx.say('not shipped: the run was deleted on the Control Plane (it goes on here; an import brings it back)');
    }
  }

  // A linked file or folder the shipper left out is said once, in the run's log and to whoever watches the worker.
  function onSkip(entry: string, reason: string): void {
    try {
      ctx.note(`not shipped: ${entry} ${reason}`);
    } catch {
      // events.jsonl itself may be what was refused; note said the line to worker.log before it tried the log.
    }
  }

  const shipping = opts.ship ?? (settingChoice(env, 'SVC_SHIP') === '1' && !keptLocal(dir))
    ? createShipLoop(createShipper(dir, env, onControl, onSkip), dir, (text) => ctx.say(text), opts.lastShipMs)
    : null;
  const markDirty = () => shipping?.changed();
  const log = openEventLog(dir, markDirty, opts.seqAfter);

  const ctx = {
    dir,
    state,
    env,
    update(fields: Partial<RunState>): void {
      Object.assign(state, fields, { updated_at: new Date().toISOString() });
      writeState(dir, state);
      markDirty();
    },
    /** The run's cost after `change` (withCost), written with any other `fields` of the same moment. */
    updateCost(change: Parameters<typeof withCost>[1], fields: Partial<RunState> = {}): void {
      ctx.update({ ...withCost(state, change), ...fields });
    },
    /** `marks`: more fields of its `run.status` event (a resume's `resumed`). */
    setStatus(to: RunStatus, fields: Partial<RunState> = {}, marks: Record<string, unknown> = {}): void {
      const from = state.status;
      // state.json first, its event after (as launch.ts's writes are). A worker dying between the two then leaves a
      // status with no line, which a follower waits a little for (run-logs.ts). The other order would leave a line
      // for a status the run never had: recovery, resume and the trigger read state.json, so a dead worker's run is
      // ended `failed` after its log said `succeeded`, and the Control Plane stores that end it never had (it takes
      // run.status lines as facts: the run's timeline, a pod's one end, the duration metrics by end status).
      ctx.update({ ...fields, status: to });
      if (from !== to) {
        ctx.event('run.status', { from, to, ...marks });
        ctx.say(`status ${to}${fields.error ? `: ${fields.error}` : ''}`);
      }
    },
    event(kind: string, data: Record<string, unknown> = {}): void {
      log.append(kind, data);
    },
    saveArtifact(path: string, content: string | Buffer): void {
      const parts = path.split('/');
      const name = parts.pop()!;
      // No name that leaves artifacts/, nor one carrying a secret to every list (ingest refuses both, isArtifactPath).
      const leaves = [...parts, name].some((part) => part === '' || part === '.' || part === '..');
      if (leaves || redactSecrets(path) !== path) {
        throw new UnsafePathError(`"${redactSecrets(path)}" is no artifact name in "${artifactsDir(dir)}"`);
      }
      // Every folder level is held open and a link at the name refused: no link under artifacts/ is followed. Replaced
      // whole, so a receipt a --verify cannot write on a full disk leaves the one there as it was.
      // A log (the provider's, a check's) is read by every reader of the Control Plane: no secret it quotes is kept.
      const bytes = name.endsWith('.log') ? logWithoutSecrets(content)
        : Buffer.isBuffer(content) ? content : Buffer.from(content);
      withDir(openRunDir(dir), (run) => {
        const folder = makePlainDirsIn(run, ['artifacts', ...parts], 0o777);
        withDir(folder, () => replaceNoFollowIn(folder, name, bytes));
      });
      ctx.event('artifact', { path, size: bytes.length, sha256: hash('sha256', bytes, 'hex') });
    },
    /** The provider or check now running (its own process group), so a stop can reach it. */
    setChild(identity: RunState['child']): void {
      child = identity;
      ctx.update({ child: identity });
    },
    /** Where a group svc starts for the run itself (a push: git-group.ts) is recorded as its child while it runs. */
    groupWatch(): GroupWatch {
      return { run: state.run, running: (identity) => ctx.setChild(identity) };
    },
    requestStop(reason: string): void {
      if (stoppedBy !== null) return;
      stoppedBy = reason;
      ctx.say(`stopping: ${reason}`);
      if (child) void terminateGroup(child, STOP_GRACE_MS);
    },
    stopRequested: (): boolean => stoppedBy !== null,
    stoppedBy: (): string | null => stoppedBy,
    /** The answer waiting for the blocked run, by whichever one channel it came (docs/architecture.md, "Channels"). */
    takeAnswer: (): Answer | null => answers.shift() ?? takeAnswer(env, state.source, state.run, dir),
    /** Progress lines for whoever watches the worker (terminal or worker.log). */
    say(text: string): void {
      opts.say?.(`[svc ${state.run}] ${text}\n`);
    },
    /** A line of svc's own in the run's log (with any further fields), also said to whoever watches the worker. */
    note(text: string, fields: Record<string, unknown> = {}): void {
      ctx.say(text);
      ctx.event('log', { stream: 'svc', text, ...fields });
    },
    /** The worker's last writes: its last ship, the log closed, and then (leave) its pid cleared. */
    async close(): Promise<void> {
      try {
        await shipping?.close();
        log.close();
      } finally {
        ctx.leave();
      }
    },
    /**
     * This process as the run's worker, for one that no launcher recorded (an --open-pr, which writes and ships the
     * run in the command's own process): until its leave, a resume or a verify waits for it (proc-group.ts
     * liveWorkerOf). No group: nothing signals it by this record (the run has ended; stopLocalRun leaves it).
     */
    enter(): void {
      // updated_at kept, as by leave: the run itself did not change.
      Object.assign(state, { pid: process.pid, pgid: null, proc_start: procStart(process.pid) });
      writeState(dir, state);
    },
    /**
     * The worker's last write, after every other of its own (state.json, plan.json, events.jsonl, ship.json, the
     * ship-pending marker): its pid cleared. Until then a resume, a verify, an --open-pr or a checkout's rename waits
     * for it (proc-group.ts liveWorkerOf); a worker that cleared it first could have its late ship.json roll the next
     * worker's offset back and its last batch reach the Control Plane after that worker's. Only this process's own
     * pid: a verify's stays its run's last attempt's, and one that found another's run writes nothing of it.
     */
    leave(): void {
      if (state.pid !== process.pid) return;
      // updated_at kept: the run JSON the last ship carried is what the run still is (no pid in it, toRunJson).
      state.pid = null;
      writeState(dir, state);
    },
    /**
     * Ends this process at once, as a signal to a worker (or an --open-pr) whose run has nothing left to stop does:
     * the child it runs now first (an --open-pr's push, which would go on pushing with nobody left to record what it
     * did), then a last ship not done (`shipped` false) is left to the next svc command (markPending), and the pid is
     * cleared last, as by leave. The exit code is the run's (exitCodeOf).
     */
    exitNow(shipped: boolean): never {
      if (child) {
        endGroupNow(child, STOP_GRACE_MS);
        // Gone: written with the pid's clear below, as it ended (leave keeps updated_at).
        state.child = null;
      }
      if (!shipped) markPending(dir);
      ctx.leave();
      process.exit(exitCodeOf(state));
    },
  };
  for (const item of opts.control ?? []) onControl(item);
  return ctx;
}

/** A worker's exit code (or an --open-pr's): 0 only when its run succeeded. */
export const exitCodeOf = (state: RunState): number => (state.status === 'succeeded' ? 0 : 1);

/** The signals that end a run's worker, or an --open-pr writing its run. */
const END_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/** `handler` on each signal that ends a worker or an --open-pr (END_SIGNALS); what it returns takes it off again. */
export function onEndSignal(handler: (signal: NodeJS.Signals) => void): () => void {
  for (const signal of END_SIGNALS) process.on(signal, handler);
  return () => {
    for (const signal of END_SIGNALS) process.off(signal, handler);
  };
}

/**
 * Whether a process is the run's child: providers and checks are started with SVC_RUN_ID=<run> in their environment
 * (provider-phase.ts, finish-phase.ts, git-group.ts). The owner check before the run's recorded child (its group, its
 * sandbox's init) is signalled, by the worker as it ends or by a stop from outside.
 */
export function isChildOf(run: string): OwnerCheck {
  return (pid) => procList(pid, 'environ')?.includes(`SVC_RUN_ID=${run}`) ?? false;
}

/** Whatever happens to the worker's process, the run's child (its group, its sandbox's init) must not outlive it. */
export function endChildOnExit(ctx: RunContext): void {
  // ctx.state.child may still be what state.json said at start, so it gets the same owner check as any stopper's.
  const owner = isChildOf(ctx.state.run);
  process.on('exit', () => {
    if (ctx.state.child) signalGroup(ctx.state.child, 'SIGKILL', owner);
    // Its sandbox's init too: still in its setup it is in no group of svc's, and this process reaps no bwrap now.
    if (ctx.state.child?.init) killNamespace(ctx.state.child.init, owner);
  });
}

/**
 * From outside the worker: identity-checked SIGTERM to its group, SIGKILL after the grace. `by` names who stopped
 * it (`svc runs stop`, the Control Plane…): the stopped run's failure reason says so. `workerLost`: the caller follows
 * the run and found it gone without a worker (the trigger server's `svc start --stop --worker-lost`), so a run with
 * none past the grace ends as a dead worker's; a person's stop of such a run ends it `stopped`.
 */
export async function stopLocalRun(
  repo: string, run: string, by: string, workerLost = false,
): Promise<RunState | null> {
  const dir = runDir(repo, run);
  if (!existsSync(dir)) return null;
  let state = tryReadState(dir);
  if (!state || TERMINAL.has(state.status)) return state;
  // A run still without a worker past the grace never got one (its launcher died): nobody stopped a working run.
  const neverStarted = workerLost && noWorkerComing(state, Date.now());
  // A worker that has not recorded itself yet sees "stopping" when it starts and stops at once.
  if (!state.pid) {
    writeState(dir, { ...state, status: 'stopping', updated_at: new Date().toISOString() });
    for (let i = 0; i < 20 && !state?.pid && !TERMINAL.has(state?.status ?? 'queued'); i++) {
      await sleep(100);
      state = tryReadState(dir);
    }
    if (!state) return null;
  }
  // A worker that died without ending its run (kill -9, out of memory, a reboot) failed it; this stop only finds that.
  const died = state.pid !== null ? state.proc_start !== null && !workerAlive(state) : neverStarted;
  if (state.pid) {
    const worker = { pid: state.pid, pgid: state.pgid ?? state.pid, proc_start: state.proc_start };
    // state.json is only a claim: the pid must still be our worker for this very run (its argv says so).
    const owner = isWorkerOf(run, repo);
    // The worker stops its provider (SIGTERM, then SIGKILL after the grace) and records "stopped" itself.
    if (signalGroup(worker, 'SIGTERM', owner) && !(await waitGroupGone(worker.pgid, STOP_GRACE_MS * 2 + 2_000))) {
      signalGroup(worker, 'SIGKILL', owner);
      await waitGroupGone(worker.pgid, 5_000);
    }
  }
  state = tryReadState(dir) ?? state;
  if (state.child) await terminateGroup(state.child, STOP_GRACE_MS, isChildOf(run));
  // A sandbox's init still in its setup outlives its bwrap and goes on to start the agent; a worker that died
  // (SIGKILL, out of memory) before bwrap's exit never killed it (spawn-group.ts).
  if (state.child?.init) killNamespace(state.child.init, isChildOf(run));
  const failure = runFailure('stopped', `stopped by ${by}`);
  if (!TERMINAL.has(state.status)) {
    const from = state.status;
    const now = new Date().toISOString();
    const end = died ? {
      status: 'failed' as const, failure: runFailure('infra', `the run's worker died (found by ${by})`),
      ...withCost(state, { reported: largerUsage(state.reported ?? NO_USAGE, reportedUsage(dir, state.provider)) }),
    } : { status: 'stopped' as const, failure };
    state = {
      ...state, ...end, ended_at: state.ended_at ?? now, updated_at: now, question: null, child: null, pid: null,
    };
    writeState(dir, state);
    appendEvent(dir, 'run.status', { from, to: state.status });
    // No worker ships this end: the next svc command (or `svc ship`) does.
    markPending(dir);
  } else if (state.status === 'stopped' && state.failure?.class === 'stopped') {
    // The worker knew only the signal it got; this stopper knows who sent it.
    state = { ...state, failure, updated_at: new Date().toISOString() };
    writeState(dir, state);
    markPending(dir);
  }
  return state;
}

/**
 * What the provider's output reported, rebuilt from the run's log events: the `cost` events' usage (the run's total
 * when its last attempt began), then a command provider's `svc.cost` lines after the last of them (the attempt a dead
 * worker never ended). Only what the events kept.
 */
function reportedUsage(dir: string, provider: string): Usage {
  const folder = openRunFolder(dir);
  if ('failed' in folder) return NO_USAGE;
  const text = withDir(folder, () => readPlainIn(folder, 'events.jsonl', Infinity));
  if (typeof text === 'string') return NO_USAGE;
  let ended = NO_USAGE;
  let attempt = NO_USAGE;
  let reader = createOutputReader(provider);
  for (const line of text.toString('utf8').split('\n')) {
    const event = objOrNull(tryParseJson(line));
    const data = objOrNull(event?.data);
    if (event?.kind === 'cost') {
      ended = addUsage(ended, svcCost(data ?? {}));
      attempt = NO_USAGE;
      reader = createOutputReader(provider);
    } else if (event?.kind === 'log' && (data?.stream === 'stdout' || data?.stream === 'stderr')) {
      const increment = typeof data.text === 'string' ? reader.line(data.stream, data.text).usage : null;
      if (increment) attempt = addUsage(attempt, increment);
    }
  }
  return addUsage(ended, attempt);
}

/**
 * The larger of two totals, figure by figure. A live worker keeps state.json's `reported` current during an attempt
 * (budgetNow), so it may already hold the rebuilt attempt, or more than the events kept: never their sum.
 */
function largerUsage(a: Usage, b: Usage): Usage {
  const larger = (x: number | null, y: number | null) => (x === null ? y : y === null ? x : Math.max(x, y));
  return {
    cost_usd: larger(a.cost_usd, b.cost_usd),
    tokens_in: larger(a.tokens_in, b.tokens_in),
    tokens_out: larger(a.tokens_out, b.tokens_out),
  };
}
