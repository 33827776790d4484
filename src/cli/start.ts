// `svc start`: make a run from a brief, spec, issue export, issue URL or tracker reference, and run it (DESIGN §6).
import { join } from 'node:path';
import { sendPendingRuns } from './ship.ts';
import { parseFlags, type CliIo } from './io.ts';
import { UsageError, NotFoundError, ConflictError, FailedError, errorMessage } from '../errors.ts';
import { readOrNull, realOrNull } from '../spawn/tree.ts';
import { countOrNull, objOrNull, str, tryParseJson } from '../untrusted.ts';
import { discoverControlUrl } from '../engine/control-url.ts';
import { setting, settingChoice, settingInt, settingUsd } from '../settings-registry.ts';
import {
  afterLastWorker, claimForResume, prepareRun, prepareRetry, spawnWorker, resolveRepo, type LaunchFacts,
  type PreparedRun,
} from '../engine/launch.ts';
import { unsandboxedWarning } from '../engine/run-plan.ts';
import { planToReuse } from '../engine/plan-reuse.ts';
import { stopLocalRun } from '../engine/run-context.ts';
import { runDir } from '../engine/paths.ts';
import {
  failureOf, readState, refuseTrackedRun, signsLater, tryReadState, type RunState, type WorkerMode,
} from '../engine/run-state.ts';
import { TERMINAL } from '../run-json.ts';
import { isValidSegment } from '../engine/ids.ts';
import { safeJson } from '../safe-json.ts';
import { printLocalLogs, createEventTail } from './run-logs.ts';

export const HELP = `Usage: svc start <input> [options]

Turns the input into a task spec and runs a coding-agent provider on it.
<input> is one of:
  file.json              an exported error-tracker issue, event, or {"issue","event"} (offline)
  https://…/issues/<id>  an error-tracker issue, fetched with ERRTRACK_AUTH_TOKEN (curl, token on stdin)
  spec.md                a Markdown task spec
  trackera:<id>          a tracker issue (.svc/inbox/trackera/<id>.json, else TRACKERA_API_KEY, else the reference)
  anything else          a one-line brief

Options:
  --brief            treat the input as a brief, whatever it looks like
  --pr               work in a worktree on svc/<run> and open a pull request when .svc/policy.json allows
  --worktree         work in an isolated worktree (.svc/worktrees/<run>) on branch svc/<run>
  --detach           print {"source","run"} and return at once; the run goes on in the background
  --follow, -f       stream the agent's output (its stdout and stderr lines, and its questions) to stderr
                     while the run works in the foreground (later: svc runs logs <run> -f)
  --provider NAME    claude, codex, gemini, aider, opencode, or a command provider from .svc/config.json
                     (no agent CLI yet? \`svc init\` writes a stand-in that needs no API key)
  --repo DIR         the git repository (default: the current directory)
  --follow-up BRANCH continue the pull request whose branch is BRANCH (svc/<run>, a branch svc made): start from
                     its head on the origin now, push the new commits to it (a fast forward, never forced; nothing
                     when someone pushed meanwhile), open no new pull request; implies --pr
    --pr-url URL     the pull request's address (the run's pr_url once pushed)
    --previous SOURCE/RUN, --previous-receipt SHA256
                     the run before this one on that branch and its receipt's integrity, which the receipt's
                     "follows" names (default: the newest ended run on the branch in this checkout)

Steering an existing run (local, no Control Plane needed; one action per command, without an input):
  --stop RUN         stop a run (SIGTERM to its process group, SIGKILL after 5 s)
  --resume RUN       continue a stopped or failed run in the same worktree
  --retry RUN        start a new run in the same group with the same spec
  --verify RUN       re-run the checks and re-issue the receipt; exits 1 unless it verified a non-empty diff
  --open-pr RUN      open the pull request of a --pr run whose work was verified but whose PR could not be opened
                     (no credentials then, an unreachable origin): pushes its branch and opens the PR now
`;

function summary(state: RunState): string {
  const { source, run, status, verdict, pr_url, error } = state;
  return safeJson({ source, run, status, verdict, pr_url, error, failure: state.failure ?? null }) + '\n';
}

function runArg(value: string | undefined, flag: string): string {
  if (!isValidSegment(value)) throw new UsageError(`${flag} needs a run id (got "${value ?? ''}")`);
  return value;
}

/** The run `run` of this project, as its folder says, for a --stop, --open-pr, --resume or --verify. */
function ownRun(repo: string, run: string, dir: string, flag: string): RunState {
  refuseTrackedRun(repo, run);
  const state = tryReadState(dir);
  if (!state) throw new NotFoundError(`No run ${run} in this repository`);
  // A run folder moved or copied here with its project still names the old folder, whose run (and worker) it is.
  if ((realOrNull(state.repo_path) ?? state.repo_path) !== (realOrNull(repo) ?? repo)) {
    throw new ConflictError(`Run ${run} belongs to the project at ${state.repo_path}, not this one (${repo}): ` +
      `the project was moved or copied; --${flag} acts on a run only in the project that made it`);
  }
  return state;
}

/** Tells the Control Plane that launched a resume refused on its way (the run is left as it was), and throws. */
function refuseResume(io: CliIo, err: unknown): never {
  io.stdout(safeJson({ refused: errorMessage(err) }) + '\n');
  throw err;
}

/**
 * A new run (or a retry) gets its worker: a renamed checkout and what its plan left out are said first. One that
 * could not be made prints `{"failure":…}` before the error, for the Control Plane that launched it.
 */
async function launchNew(io: CliIo, making: Promise<PreparedRun>, detach: boolean, showOutput: boolean) {
  const { state, plan, renamed, ...facts } = await making.catch((err: unknown) => {
    io.stdout(safeJson({ failure: failureOf(err) }) + '\n');
    throw err;
  });
  if (renamed) {
    const runs = `${renamed.runs} earlier run${renamed.runs === 1 ? '' : 's'}`;
    io.stderr(`svc start: this repository is now named ${renamed.to}; ${runs} renamed from ` +
      `${renamed.from.join(', ')} (their receipts keep the name they were signed with)\n`);
  }
  for (const note of plan.notes) io.stderr(`svc start: ${note}\n`);
  return launch(io, state, facts, 'start', detach, showOutput);
}

/** The worker, in a process group of its own; in the foreground, followed, and Ctrl-C here becomes a clean stop. */
async function launch(
  io: CliIo, state: RunState, facts: LaunchFacts, mode: WorkerMode, detach: boolean, showOutput = false,
): Promise<number> {
  if (facts.unconfined) io.stderr(`svc start: ${facts.unconfined}\n`);
  const dir = runDir(state.repo_path, state.run);
  const since = new Date().toISOString();
  // Past a resumed run's earlier output, before the worker writes anything.
  const tail = showOutput ? createEventTail(dir) : null;
  tail?.();
  const release = mode === 'resume' ? await claimForResume(state).catch((err: unknown) => refuseResume(io, err)) : null;
  let child: ReturnType<typeof spawnWorker>;
  try {
    child = spawnWorker(state, mode, io.env, !detach);
  } catch (err) {
    // A resume's worker that did not start (refused at the run's take lock or by the run read again, or a spawn that
    // threw) leaves the run as it was (launch.ts requeue, putBack), as after a refused claim.
    if (mode === 'resume') refuseResume(io, err);
    throw err;
  } finally {
    release?.();
  }
  // A worker that could not be started (its folder gone) is an error to report, never an unhandled 'error' event.
  const spawnFailure = await new Promise<Error | null>((resolve) => {
    child.on('error', resolve);
    child.once('spawn', () => resolve(null));
  });
  if (spawnFailure) {
    // A resume's run is back to what it was (launch.ts putBack) with no worker to ship it: the Control Plane learns
    // that now, not the failure of this command.
    if (mode === 'resume') await sendPendingRuns(io, state.repo_path, 1_500);
    throw new FailedError(`Could not start the run's worker: ${spawnFailure.message}`);
  }
  // The run's address first, so a caller (a Kubernetes pod log) knows it at once.
  io.stdout(safeJson({ source: state.source, run: state.run }) + '\n');
  if (detach) {
    child.unref();
    await sendPendingRuns(io, state.repo_path, 1_500);
    return 0;
  }
  // A worker whose run's status is final has only its last writes and ship left: it gets the signal and ends once
  // those writes are done (a stop would return at once and leave this launcher waiting out the ship). Any other run
  // is stopped, and this launcher waits for the stopper's writes (its reason, the ship-pending marker) before it
  // exits. A verify's run is final throughout: its checks go on, as a stop would leave them.
  const interrupt = 'an interrupt of svc start';
  let stopping: Promise<unknown> = Promise.resolve();
  const onSignal = (signal: NodeJS.Signals) => {
    const now = tryReadState(dir);
    if (mode === 'verify' || !now) return;
    if (TERMINAL.has(now.status)) child.kill(signal);
    else stopping = Promise.all([stopping, stopLocalRun(state.repo_path, state.run, interrupt)]);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let closed = false;
  const ended = new Promise<void>((resolve) => child.on('close', () => {
    closed = true;
    resolve();
  }));
  const output = tail
    ? printLocalLogs(dir, io.stderr, { follow: true, until: () => closed, agentOnly: true, tail })
    : Promise.resolve();
  // Earlier runs the Control Plane never heard the end of go while this one works.
  await sendPendingRuns(io, state.repo_path);
  await ended;
  await output;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  await stopping;
  const final = readState(dir);
  io.stdout(summary(final));
  // A pod's run container is an init container: failing it would keep the signer, which judges the run, from starting.
  if (facts.signsLater) return 0;
  if (mode !== 'verify') {
    // Any other end is 1, whatever its failure class (README "Exit codes": scripts read the summary's failure.class).
    return final.status === 'succeeded' ? 0 : 1;
  }
  const unverified = notVerifiedSince(dir, since, final);
  if (unverified !== null) io.stderr(`svc start: verify: ${unverified}\n`);
  return unverified === null ? 0 : 1;
}

/**
 * Why a --verify did not verify the run, or null when it did: it issued a receipt (after `since`) on a change, with a
 * verdict other than not_verified, for a run that ran to its end. A verify that failed or was stopped issued none; a
 * stopped run's work was cut off, and an empty diff holds nothing to judge, whatever the verdict says (README).
 */
function notVerifiedSince(dir: string, since: string, run: RunState): string | null {
  const receipt = objOrNull(tryParseJson(readOrNull(join(dir, 'artifacts', 'receipt.json')) ?? ''));
  if (receipt === null || (str(receipt.issued_at) ?? '') < since) return 'no receipt issued (the run\'s log says why)';
  if (run.status === 'stopped') return 'the run was stopped before its end: its work is unfinished';
  if ((countOrNull(objOrNull(receipt.diff)?.files) ?? 0) === 0) return 'nothing to verify: the diff is empty';
  return str(receipt.verdict) === 'not_verified' ? 'the verdict is not_verified' : null;
}

export default async function start(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, {
    brief: { type: 'boolean' },
    pr: { type: 'boolean' },
    worktree: { type: 'boolean' },
    detach: { type: 'boolean' },
    follow: { type: 'boolean', short: 'f' },
    provider: { type: 'string' },
    repo: { type: 'string' },
    stop: { type: 'string' },
    'worker-lost': { type: 'boolean' },
    resume: { type: 'string' },
    retry: { type: 'string' },
    verify: { type: 'string' },
    'open-pr': { type: 'string' },
    'run-id': { type: 'string' },
    'follow-up': { type: 'string' },
    'pr-url': { type: 'string' },
    previous: { type: 'string' },
    'previous-receipt': { type: 'string' },
  });
  // Read by the worker only later (its gate, an automatic retry, its shipper, its pull request): a bad value exits 2
  // here, before a new, retried, resumed or verified run is made or touched. A stop starts no worker, and a person
  // must always be able to stop.
  if (values.stop === undefined) {
    if (settingChoice(io.env, 'SVC_SHIP') === '1') discoverControlUrl(io.env);
    settingInt(io.env, 'SVC_INFRA_RETRY_WAIT_S');
    settingUsd(io.env, 'SVC_BUDGET_REPO_DAY_USD');
    settingUsd(io.env, 'SVC_BUDGET_SERVER_DAY_USD');
    setting(io.env, 'GITHUB_API_URL');
  }
  const repoDir = values.repo ?? process.cwd();
  const detach = values.detach === true;
  const showOutput = values.follow === true;
  if (showOutput && detach) {
    throw new UsageError('--follow streams a run in the foreground: it cannot go with --detach');
  }

  // One thing per command: a second action (or an input beside one) would be dropped without a word.
  const actions = (['stop', 'open-pr', 'resume', 'verify', 'retry'] as const).filter((f) => values[f] !== undefined);
  if (actions.length > 1 || (actions.length === 1 && positionals.length > 0)) {
    throw new UsageError(`Give one of an input, --stop, --resume, --retry, --verify or --open-pr (got ${
      [...(positionals.length > 0 ? ['an input'] : []), ...actions.map((f) => `--${f}`)].join(', ')})`);
  }
  for (const flag of ['stop', 'open-pr', 'resume', 'verify'] as const) {
    const run = values[flag];
    if (run === undefined) continue;
    const repo = resolveRepo(repoDir);
    const dir = runDir(repo, runArg(run, `--${flag}`));
    // A resume writes nothing before its worker's start (launch.ts requeue).
    const refusal = (err: unknown): never => {
      if (flag === 'resume') refuseResume(io, err);
      throw err;
    };
    let state: RunState;
    try {
      state = ownRun(repo, run, dir, flag);
    } catch (err) {
      return refusal(err);
    }
    if (flag === 'stop') {
      if (TERMINAL.has(state.status)) {
        io.stderr(`svc start: run ${run} had already ended (${state.status}): nothing to stop\n`);
      }
      const workerLost = values['worker-lost'] === true;
      io.stdout(summary((await stopLocalRun(repo, run, 'svc start --stop', workerLost)) ?? state));
      // A run whose worker is gone has no shipper: its end goes to the Control Plane now.
      await sendPendingRuns(io, repo);
      return 0;
    }
    // As a resume and a verify do: its state.json and ship.json are the last worker's until it has left.
    state = await afterLastWorker(dir, flag).catch(refusal);
    if (flag === 'open-pr') {
      // Loaded here, not with the command: the finish phase (its sandbox, spawn and cgroup modules) is no part of a
      // start's way to its worker (docs/bench.md, "the launcher's modules").
      const { openPrLater } = await import('../engine/finish-phase.ts');
      io.stdout(summary(await openPrLater(dir, io.env, (t) => io.stderr(`svc start: ${t}\n`))));
      return 0;
    }
    let facts: LaunchFacts;
    try {
      if (flag === 'resume' && state.status !== 'stopped' && state.status !== 'failed') {
        throw new ConflictError(`Run ${run} is ${state.status}; only stopped or failed runs can be resumed`);
      }
      if (flag === 'verify' && !TERMINAL.has(state.status)) {
        throw new ConflictError(`Run ${run} is ${state.status}; verify it once it has ended`);
      }
      // Before the run is queued again: a refused resume or verify leaves it as it was.
      const plan = planToReuse(dir, io.env, state);
      facts = { unconfined: unsandboxedWarning(plan.sandbox), signsLater: signsLater(io.env) };
    } catch (err) {
      return refusal(err);
    }
    return launch(io, state, facts, flag, detach, showOutput);
  }
  if (values.retry !== undefined) {
    const retry = prepareRetry(repoDir, runArg(values.retry, '--retry'), values['run-id'] ?? null, io.env);
    return launchNew(io, retry, detach, showOutput);
  }
  if (positionals.length === 0) throw new UsageError('Missing input: a brief, file or issue URL (svc start --help)');
  // Loaded only for a follow-up, as launch.ts loads the rest of it.
  const followUp = values['follow-up'] === undefined ? null : (await import('../engine/follow-up.ts')).followUpRequest({
    branch: values['follow-up'], prUrl: values['pr-url'], previous: values.previous,
    previousReceipt: values['previous-receipt'],
  });
  return launchNew(io, prepareRun({
    input: positionals.join(' '),
    forceBrief: values.brief === true,
    followUp,
    pr: values.pr === true,
    worktree: values.worktree === true,
    provider: values.provider ?? null,
    repo: repoDir,
    runId: values['run-id'] ?? null,
    env: io.env,
  }), detach, showOutput);
}
