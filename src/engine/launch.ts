// The launcher: makes a run (id, folder, spec, plan, queued state) and starts its worker, detached.
import { existsSync, mkdirSync, closeSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { secretsIn, startChild, withoutSecrets, workerArgv, WORKER_SECRET_NAMES } from '../spawn/start.ts';
import { hash } from 'node:crypto';
import { BadInputError, ConflictError, RefusedError, errorMessage } from '../errors.ts';
import { TERMINAL } from '../run-json.ts';
import {
  buildTask, classifyInput, isRepoName, isRoutedRepoName, isWebhookOrigin, type Task,
} from './spec.ts';
import {
  planRun, refuseOversizedPlan, refuseUncommitted, unsandboxedWarning, writePlan, type RunPlan,
} from './run-plan.ts';
import { planForRetry } from './plan-reuse.ts';
import { newRunId, isValidSegment } from './ids.ts';
import { realOrNull } from '../spawn/tree.ts';
import { settingOr } from '../settings-registry.ts';
import {
  git, headAndBranch, excludeEngineFolders, gitDirs, repoName, snapshotTree, treeGit, workingChanges,
} from './git.ts';
import { projectOf, runDir, runWorktreeHolding, worktreeDir } from './paths.ts';
import {
  appendEvent, localRuns, makeRunKey, openEventLog, readState, refuseTrackedRun, runKeyFor, signsLater, writeState,
  type RunState, type WorkerMode,
} from './run-state.ts';
import { isWorkerOf, untilOwned, workerAlive, workerComing } from './proc-group.ts';
import { identityOf } from '../proc-stat.ts';
import { LAST_WORKER_WAIT_MS, refuseHeldRun, workerConflict, workerStillThere } from './last-worker.ts';
import { takeRun } from './run-take.ts';
import { markPending } from './ship-pending.ts';
import { adoptRepoName, claimCheckout, unwritable, type RepoRename } from './checkout-claim.ts';
import {
  openAppendNoFollowIn, openRunDir, plainEngineFolder, refuseLinkedMasks, withDir, writeNoFollowIn,
} from './safe-fs.ts';
import { pathIn } from './plain-tree.ts';
import { checkPrPossible, OriginUnreachableError } from './pr.ts';
import type { FollowUp } from './follow-up.ts';
import { newTraceId, parseTraceparent } from '../trace.ts';

interface StartOptions {
  input: string;
  forceBrief: boolean;
  pr: boolean;
  worktree: boolean;
  provider: string | null;
  repo: string;
  runId: string | null;
  env: NodeJS.ProcessEnv;
  /** --follow-up: continue the pull request on this branch (follow-up.ts). */
  followUp?: FollowUp | null;
}

/** SVC_REPO_NAME names only a run a trigger server started (a webhook origin, which only a launcher sets). */
export function runRepoName(dir: string, env: NodeJS.ProcessEnv): string {
  return isRoutedRepoName(env) ? env.SVC_REPO_NAME! : repoName(dir);
}

/** The repository's root; git's own reason (no repository, "dubious ownership", …) in the error when there is none. */
export function resolveRepo(dir: string): string {
  let top: string;
  try {
    top = git(dir, ['rev-parse', '--show-toplevel']).trim();
  } catch (err) {
    throw new BadInputError(`Not a git repository: "${dir}" (${errorMessage(err)}); run svc inside a git repository `
      + '(git init makes one), or name one with --repo DIR');
  }
  // Its agent could have planted a run folder there, plan.json and all, that a resume would run by.
  const held = runWorktreeHolding(top) ?? runWorktreeHolding(realOrNull(top) ?? top);
  if (held) {
    throw new BadInputError(`"${top}" is svc's worktree of run ${held.run}, which its agent wrote: never a project; ` +
      `run svc in the project "${held.project}", or name it with --repo`);
  }
  return top;
}

type RunFlags = 'repo' | 'pr' | 'worktree' | 'provider' | 'env' | 'followUp';
type NewRun = Pick<StartOptions, RunFlags> & Task & {
  run: string;
  groupId: string | null;
  input: RunState['input'];
  /** Retry: the earlier run's plan, taken as it is; else the plan is resolved here (with `provider`). */
  plan: RunPlan | null;
  /** Retry of a run a trigger server routed: the served name it keeps, whoever retries it. */
  routedName?: string;
};

/** A new run's state and plan, and the rename of the checkout's earlier runs its name caused (if any). */
export interface PreparedRun extends LaunchFacts {
  state: RunState;
  plan: RunPlan;
  renamed: RepoRename | null;
}

/** The launcher's warning of an unsandboxed plan, and whether a signer judges the run later (it then exits 0). */
export interface LaunchFacts { unconfined: string | null; signsLater: boolean }

/** The run's plan (resolved now, or a retry's earlier one), checked before anything is written; then the run. */
async function createRun(n: NewRun): Promise<PreparedRun> {
  if (!isValidSegment(n.run)) throw new BadInputError(`Run id "${n.run}" is not a valid path segment`);
  const key = runKeyFor(n.env);
  const isolated = n.worktree || n.pr;
  const routed = isRoutedRepoName(n.env);
  const plan = n.plan ?? planRun({
    repo: n.repo, workdir: isolated ? worktreeDir(n.repo, n.run) : n.repo, provider: n.provider, pr: n.pr, env: n.env,
    routed,
  });
  refuseOversizedPlan(plan);
  const facts: LaunchFacts = { unconfined: unsandboxedWarning(plan.sandbox), signsLater: signsLater(n.env) };
  // A --pr run whose pull request could not be opened is refused before anything is written. A Kubernetes pod's run
  // container holds no GitHub credential by design: its signer container opens the PR.
  if (plan.push_target !== null && !facts.signsLater) {
    await checkPrPossible(plan.push_target, n.env).catch((err: unknown) => {
      if (err instanceof OriginUnreachableError) {
        throw new OriginUnreachableError(`${err.message} (nothing was started)`, { cause: err });
      }
      if (!(err instanceof RefusedError)) throw err;
      throw new RefusedError(`Refusing to start a --pr run: ${err.message} (nothing was started)`, { cause: err });
    });
  }
  // Only a follow-up loads its module, and the receipt and key modules it brings (docs/bench.md).
  const followUps = n.followUp ? await import('./follow-up.ts') : null;
  const follow = n.followUp && followUps
    ? await followUps.followUpStart(n.repo, plan.push_target, n.followUp, n.env)
    : null;
  // The commit and the branch checked out, with the git directories: one git, on the launcher's way to the agent.
  const head = headAndBranch(n.repo);
  const { own, common: gitDir } = head;
  // Before anything is written: a link the repository commits at .svc, .svc/runs or .svc/worktrees would send the
  // run's files, its checkout and the agent's writable tree outside the repository (DESIGN §7a).
  plainEngineFolder(n.repo, 'runs').close();
  if (isolated) plainEngineFolder(n.repo, 'worktrees').close();
  else if (plan.sandbox.kind === 'bwrap') refuseLinkedMasks(n.repo);
  const dir = runDir(n.repo, n.run);
  if (existsSync(dir)) throw new BadInputError(`Run ${n.run} already exists in ${n.repo}`);
  try {
    excludeEngineFolders(gitDir);
  } catch (err) {
    // The first write into the git directory: one this user cannot write says so as the claim would.
    throw unwritable(gitDir, err);
  }
  const base = follow?.base ?? head.sha;
  // Against the commit the worktree is made at: a follow-up's is its pull request's branch head, not HEAD.
  if (isolated && !n.plan) refuseUncommitted(plan.provider, n.repo, base, isWebhookOrigin(n.env.SVC_ORIGIN));
  // Held from the check until this run's state is written, so two starts at once can't both find the checkout free.
  const release = isolated ? null : await claimCheckout(own);
  try {
    if (!isolated) assertCheckoutFree(n.repo);
    const start = isolated ? null : startingTree(n.repo);
    // Made inside the plain .svc/runs held open: the run folder is new, and ours; then written inside it, held open.
    withDir(plainEngineFolder(n.repo, 'runs'), (runs) => mkdirSync(pathIn(runs, n.run)));
    withDir(openRunDir(dir), (folder) => {
      mkdirSync(pathIn(folder, 'artifacts'));
      writeNoFollowIn(folder, 'spec.md', n.spec);
    });
    const now = new Date().toISOString();
    const source = settingOr(n.env, 'SVC_SOURCE');
    const name = n.routedName ?? runRepoName(n.repo, n.env);
    // A name the trigger routed (SVC_REPO_NAME) is the served entry's, not the checkout's: it renames nothing.
    const renamed = routed || n.routedName ? null : adoptRepoName(n.repo, gitDir, name);
    // The trace a run joins: its launcher's valid SVC_TRACEPARENT (the span it continues), else a new one.
    const parent = parseTraceparent(n.env.SVC_TRACEPARENT);
    const checkedOut = head.branch;
    const state: RunState = {
      source, run: n.run, repo: name, group_id: n.groupId ?? n.run, status: 'queued', verdict: null,
      ...(follow && followUps ? {
        follow_up: follow.followUp,
        provider_session: followUps.followUpSession(n.repo, follow.followUp, plan.provider.name),
      } : {}),
      brief: n.brief, origin: n.origin, provider: plan.provider.name,
      branch: isolated ? `svc/${n.run}` : checkedOut,
      pr_url: null, question: null, started_at: now, ended_at: null, updated_at: now, cost_usd: null, tokens_in: null,
      tokens_out: null, exit_code: null, error: null, repo_path: n.repo, input: n.input, workdir: n.repo,
      worktree: isolated, pr: n.pr, base_sha: base, base_tree: start?.tree ?? null, head_sha: null,
      spec_sha256: hash('sha256', n.spec, 'hex'), pid: null, pgid: null, proc_start: null,
      budget_usd: null, child: null, answers: [], base_branch: checkedOut,
      failure: null, reported: null, metered: null, trace_id: parent?.traceId ?? newTraceId(),
      trace_parent: parent?.spanId ?? null,
    };
    writePlan(dir, plan, isolated, n.env);
    makeRunKey(dir, key);
    writeState(dir, state);
    const events = openEventLog(dir);
    try {
      events.append('run.status', { from: null, to: 'queued' });
      for (const text of start?.dirty ? [...plan.notes, start.dirty] : plan.notes) {
        events.append('log', { stream: 'svc', text });
      }
    } finally {
      events.close();
    }
    return { state, plan, renamed, ...facts };
  } finally {
    release?.();
  }
}

export async function prepareRun(opts: StartOptions): Promise<PreparedRun> {
  const repo = resolveRepo(opts.repo);
  const confineTo = isWebhookOrigin(opts.env.SVC_ORIGIN) ? repo : null;
  const input = classifyInput(opts.input, { forceBrief: opts.forceBrief, cwd: process.cwd(), confineTo });
  const task = await buildTask(input, repo, opts.env);
  const followUp = opts.followUp ?? null;
  if (followUp) task.spec = (await import('./follow-up.ts')).followUpSpec(task.spec, followUp);
  return createRun({
    repo, run: opts.runId ?? newRunId(), groupId: null, ...task, pr: opts.pr || followUp !== null,
    worktree: opts.worktree, input: { kind: input.kind, value: input.kind === 'brief' ? task.brief : input.value },
    env: opts.env, plan: null, provider: opts.provider, followUp,
  });
}

/** A new run in the same group with the same spec, flags and plan (DESIGN §3: retry never changes the old run). */
export async function prepareRetry(
  repoDir: string, oldRun: string, newRun: string | null, env: NodeJS.ProcessEnv,
): Promise<PreparedRun> {
  const repo = resolveRepo(repoDir);
  const oldDir = runDir(repo, oldRun);
  if (!existsSync(oldDir)) throw new BadInputError(`No run ${oldRun} in ${repo}`);
  refuseTrackedRun(repo, oldRun);
  const old = readState(oldDir);
  return createRun({
    repo, run: newRun ?? newRunId(), groupId: old.group_id, spec: readFileSync(join(oldDir, 'spec.md'), 'utf8'),
    brief: old.brief, origin: old.origin, pr: old.pr, worktree: old.worktree, input: old.input,
    env: { ...env, SVC_SOURCE: old.source }, plan: planForRetry(oldDir, env, old),
    provider: old.provider || null,
    // The Control Plane's launcher has no SVC_REPO_NAME: a routed run's retry keeps its group's served name.
    routedName: isWebhookOrigin(old.origin) && isRepoName(old.repo) ? old.repo : undefined,
    // A retry of a follow-up continues the same pull request, after the same run, from its branch's head then.
    followUp: old.follow_up ?? null,
  });
}

/**
 * Spawns `svc worker MODE --run-id RUN --repo REPO` detached; output goes to worker.log unless inherited. An earlier
 * run (resume, verify) is taken under its take lock (run-take.ts) from the last look at it to the record of its worker:
 * no --open-pr, resume or verify takes it in between. A new run needs none: it is queued, which none of them takes.
 */
export function spawnWorker(
  state: RunState, mode: WorkerMode, env: NodeJS.ProcessEnv, inherit: boolean,
): ReturnType<typeof startChild> {
  const dir = runDir(state.repo_path, state.run);
  if (mode === 'start') return startWorker(state, mode, env, inherit, dir);
  return takeRun(dir, state.run, () => {
    const child = startWorker(state, mode, env, inherit, dir);
    // The lock is held till its argv shows it is this run's worker: only then does a reader count it.
    if (child.pid) untilOwned(child.pid, isWorkerOf(state.run, state.repo_path));
    return child;
  });
}

function startWorker(
  state: RunState, mode: WorkerMode, env: NodeJS.ProcessEnv, inherit: boolean, dir: string,
): ReturnType<typeof startChild> {
  // A verify's last look before its first write (a resume's is requeue's): an --open-pr since its wait holds the run.
  if (mode === 'verify') refuseHeldRun(readState(dir), 'verify', state.repo_path, dir);
  const log = inherit ? null : withDir(openRunDir(dir), (folder) => openAppendNoFollowIn(folder, 'worker.log'));
  const argv = workerArgv(mode, state.run, state.repo_path);
  // A resume goes back to queued right before its worker starts, as a new run is made queued: a stop that comes before
  // the worker wrote `running` finds a run to stop (not the run it resumes from, already ended), and the worker
  // honours it. A worker that did not start leaves the run as it was, its end and failure kept.
  const earlier = mode === 'resume' ? requeue(dir) : null;
  let child: ReturnType<typeof startChild>;
  try {
    // An ancestor of the agent: no secret in its environment; its own credentials (the push token, the Control Plane
    // token for ingest, the issue fetchers' keys) come on fd 3 (DESIGN §7a).
    child = startChild(argv, {
      cwd: state.repo_path,
      kind: 'svc-worker',
      base: withoutSecrets(env),
      extra: { SVC_SOURCE: state.source },
      detached: true,
      stdio: inherit ? ['ignore', 'inherit', 'inherit'] : ['ignore', log!, log!],
      secrets: secretsIn(env, WORKER_SECRET_NAMES),
    });
  } catch (err) {
    if (earlier) putBack(dir, earlier);
    throw err;
  } finally {
    if (log !== null) closeSync(log);
  }
  // No pid: the spawn failed, and its 'error' event (the caller's to report) follows.
  if (!child.pid) {
    if (earlier) putBack(dir, earlier);
  } else {
    // Recorded before the worker runs, so a stop that comes right away can still find it, and a resume or another
    // verify waits for it (afterLastWorker).
    const fresh = readState(dir);
    const identity = identityOf(child.pid);
    writeState(dir, mode === 'verify' ? { ...fresh, verifier: identity } : { ...fresh, ...identity });
  }
  return child;
}

/** The ended runs each action acts on: one it would refuse anyway is not waited for. */
const ACTS_ON: Record<LastWorkerAction, (status: RunState['status']) => boolean> = {
  resume: (status) => status === 'stopped' || status === 'failed',
  verify: (status) => TERMINAL.has(status),
  'open-pr': (status) => status === 'failed',
};

type LastWorkerAction = 'resume' | 'verify' | 'open-pr';

/**
 * An ended run's state once no worker may still write it: its last attempt's and the last verify's have left
 * (proc-group.ts liveWorkerOf), and no `svc ship` is sending it (ship-hold.ts). A status ends before its worker does:
 * the worker then puts back the plan it read, ships the run (ship.json, the ship-pending marker, a "not shipped" line)
 * and last clears its pid (run-context.ts leave); a resume's worker or an --open-pr that began meanwhile would have its
 * ship offset rolled back and its batches overtaken by the old worker's, and its state.json written over. A run the
 * action would refuse anyway is not waited for; a worker or a shipper still there after the wait is refused as a
 * conflict, by its pid.
 */
export async function afterLastWorker(dir: string, action: LastWorkerAction): Promise<RunState> {
  const acted = () => {
    const state = readState(dir);
    return TERMINAL.has(state.status) && ACTS_ON[action](state.status) ? state : null;
  };
  const alive = await workerStillThere(acted, LAST_WORKER_WAIT_MS, projectOf(dir), dir);
  const state = readState(dir);
  if (alive === null) return state;
  throw workerConflict(state, alive, action === 'open-pr' ? 'open its pull request' : action);
}

/**
 * A stopped or failed run, queued again to be resumed: it goes on, so it keeps no end or failure from before, nor the
 * worker and child it had (a stop in the resume's start must not take a dead worker's pid for the run's). Its event
 * says `resumed`: the time to an agent and the timeline's queued span are a new run's only.
 */
function requeue(dir: string): RunState {
  const earlier = readState(dir);
  // Read again here: a second resume that checked before the first queued the run would take that `queued` for the
  // earlier state and clear the first's worker.
  if (earlier.status !== 'stopped' && earlier.status !== 'failed') {
    throw new ConflictError(`Run ${earlier.run} is ${earlier.status}; only stopped or failed runs can be resumed`);
  }
  // And an --open-pr that recorded itself since the resume's wait (afterLastWorker) still writes and ships the run.
  refuseHeldRun(earlier, 'resume', projectOf(dir), dir);
  const now = new Date().toISOString();
  writeState(dir, {
    ...earlier, status: 'queued', ended_at: null, error: null, failure: null, updated_at: now,
    pid: null, pgid: null, proc_start: null, child: null,
  });
  appendEvent(dir, 'run.status', { from: earlier.status, to: 'queued', resumed: true });
  return earlier;
}

/** A resume whose worker did not start: the run is again what it was, stopped or failed as before. */
function putBack(dir: string, earlier: RunState): void {
  writeState(dir, { ...earlier, updated_at: new Date().toISOString() });
  appendEvent(dir, 'run.status', { from: 'queued', to: earlier.status, resumed: true });
  // No worker ships it: the next svc command (or `svc ship`) does.
  markPending(dir);
}

/** A run without a worker yet holds the checkout from its last write (made, or queued again by a resume), not from
 * its start: a day-old run resumed a moment ago is about to work in it. A state with no valid time of that write
 * (svc did not write it) holds nothing: nothing says its worker is coming. */
function holdsCheckout(state: RunState, now: number): boolean {
  if (state.worktree !== false || TERMINAL.has(state.status)) return false;
  if (state.pid === null) return workerComing(state, now);
  return workerAlive(state);
}

/**
 * Refuses a second run without a worktree in one checkout: two runs writing one tree would sign each other's work.
 * `resuming`: the run a resume takes the checkout for, which is not in its own way (a second resume of it is refused
 * as one of a run no longer stopped, when it queues the run again).
 */
function assertCheckoutFree(repo: string, resuming: string | null = null): void {
  const now = Date.now();
  const runs = localRuns(repo, { strict: true });
  const busy = runs.find((found) => found.run !== resuming && found.state.repo_path === repo &&
    holdsCheckout(found.state, now));
  if (!busy) return;
  const then = resuming === null ? 'start this run with --worktree (its own checkout), or wait for it to end'
    : `wait for run ${busy.run} to end, then resume this run`;
  // The stop named is the local one: it needs no Control Plane, which the refused command may not have either.
  throw new RefusedError(`Run ${busy.run} is already working in this checkout without a worktree; ${then} ` +
    `(svc start --stop ${busy.run} ends it now)`);
}

/**
 * A resume of a run in the checkout itself takes the checkout as a new run does (createRun): refused while another
 * run works there. The claim is held until the resume has queued its run again (spawnWorker): the caller releases it.
 */
export async function claimForResume(state: RunState): Promise<(() => void) | null> {
  if (state.worktree !== false) return null;
  const release = await claimCheckout(gitDirs(state.repo_path).own);
  try {
    assertCheckoutFree(state.repo_path, state.run);
  } catch (err) {
    release();
    throw err;
  }
  return release;
}

/** The checkout's starting tree when it is not HEAD's (a run without a worktree diffs only its own changes). */
function startingTree(repo: string): { tree: string | null; dirty: string | null } {
  const tree = treeGit(repo);
  const { changed, embedded } = workingChanges(tree);
  if (changed.length === 0) return { tree: null, dirty: null };
  const dirty = `the checkout had ${changed.length} uncommitted or untracked file(s) at the start ` +
    `(e.g. ${changed[0]}); the diff and receipt cover only what changed after`;
  return { tree: snapshotTree(tree, embedded), dirty };
}
