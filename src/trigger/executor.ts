// How a job's `svc start` is launched and its run followed. The local child process is the default executor, at
// this file's end: `node <cli> start …` as a child with an allowlisted env, then it watches the run's state.json
// (run-follow.ts). Others (e.g. a Kubernetes one) implement the same two calls and are picked by SVC_TRIGGER_EXECUTOR.
import {
  LAUNCH_TIMEOUT_MS, secretsIn, startChild, WORKER_SECRET_NAMES, type StartOptions,
} from '../spawn/start.ts';
import { oneLine } from '../one-line.ts';
import { signalGroup } from '../engine/proc-group.ts';
import { identityOf, type ProcIdentity } from '../proc-stat.ts';
import { operatorPassedEnv } from '../engine/config.ts';
import { ORIGIN_REFUSAL_LINE, ORIGIN_REFUSALS, type OriginRefusal } from '../engine/answers.ts';
import { createLogger, type Logger } from '../log.ts';
import { settingOr } from '../settings-registry.ts';
import { obj, tryParseJson } from '../untrusted.ts';
import { isValidSegment } from '../engine/ids.ts';
import { isIssueReference, mayFetchIssue } from '../engine/spec.ts';
import type { RunRef } from '../client/types.ts';
import {
  followLocalRun, type FollowOptions, type RunOutcome, type Unlaunched,
} from './run-follow.ts';

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
  /**
   * A launch started before its checkout was confirmed: nothing of the job (its secrets, its go-ahead) reaches the
   * launcher until this is true; false ends it, and it never sees the checkout (managed-checkout.ts `early`).
   */
  word?: Promise<boolean>;
}

/** A launch whose word was false: it started nothing and made no run. */
export const WITHDRAWN = 'withdrawn before its word';

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

/** `reason` is a fixed text the origin may be told; `detail`, what svc said, is for the server's log only. */
export type AnswerResult = { ok: true } | { ok: false; reason: string; detail: string };

/** `launch` runs the launcher to its end (quick with `--detach`), reports a failed launch rather than throwing and
 * puts no secret in argv or environment. `follow` gives null for a run it cannot find, 'aborted' on shutdown (the job
 * stays `running`, re-attached later), UNLAUNCHED for a lost launch that reached no agent (FollowOptions.launching). */
export interface JobExecutor {
  /** The `source` of the runs it starts (their launchers' SVC_SOURCE). */
  source: string;
  launch(job: ExecJob): Promise<LaunchResult>;
  follow(run: RunRef, signal: AbortSignal, opts: FollowOptions): Promise<RunOutcome | null | 'aborted' | Unlaunched>;
  /** Answers a blocked run as `svc answer --origin WHO` does; absent where it cannot reach the runs. */
  answer?(run: RunRef, text: string, workdir: string, origin: string): Promise<AnswerResult>;
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

// The default executor: a local child process.
const OUTPUT_CAP = 64 * 1024;
/** What a job's run uses itself (no webhook secret); not TRACKERA_API_KEY: a trackera run reads its staged snapshot. */
const LAUNCHER_SECRETS = WORKER_SECRET_NAMES.filter((name) => name !== 'TRACKERA_API_KEY');
/** What `svc start --stop` uses: it only ships the run's end (DESIGN §7a: no push or issue credential). */
const STOP_SECRETS = ['SVC_CONTROL_TOKEN', 'OTEL_EXPORTER_OTLP_HEADERS'];

/** ERRTRACK_AUTH_TOKEN only to a job whose run may fetch an issue with it (jobMayFetchIssue): not a chat's, whose
 * text may name any project's issue, nor an alert's or /jobs', whose brief is never an issue URL (DESIGN §7a). */
function secretsFor(secrets: Record<string, string>, job: ExecJob | null): Record<string, string> {
  if (job !== null && jobMayFetchIssue('errtrack', job)) return secrets;
  const { ERRTRACK_AUTH_TOKEN: _withheld, ...rest } = secrets;
  return rest;
}

export function createLocalExecutor(opts: {
  /** dist/cli.js, run with `execPath`. */
  cliPath: string;
  execPath?: string;
  env: NodeJS.ProcessEnv;
  pollMs?: number;
  /** A launcher, or a dead worker's stop, still running after this long is killed (SIGTERM, then SIGKILL). */
  launchTimeoutMs?: number;
  log?: Logger;
}): JobExecutor {
  const pollMs = opts.pollMs ?? 1000;
  const launchTimeoutMs = opts.launchTimeoutMs ?? LAUNCH_TIMEOUT_MS;
  const log = opts.log ?? createLogger('trigger');
  // Read once: the run's secrets (sent down a pipe on the launcher's fd 3, never its environment) and the
  // operator's names passed to agents (operator.json "env"), which cross the launcher's allowlist.
  const secrets = secretsIn(opts.env, LAUNCHER_SECRETS);
  const operatorEnv = operatorPassedEnv(opts.env);

  /** `svc ARGS…`; with `end`, in a process group of its own, signalled once `end` aborts (SIGTERM, SIGKILL 5 s on). */
  function startSvc(
    args: readonly string[], cwd: string, handed: StartOptions['secrets'], extra: Record<string, string>,
    end?: AbortSignal,
  ) {
    const output = { stdout: '', stderr: '' };
    const child = startChild([opts.execPath ?? process.execPath, opts.cliPath, ...args], {
      cwd, kind: 'launcher', base: opts.env, extra: { ...operatorEnv, ...extra }, detached: end !== undefined,
      stdio: ['ignore', 'pipe', 'pipe'], secrets: handed,
    });
    // Taken at spawn: `end` signals this group only while it is still this child's (pids are reused).
    const group = child.pid === undefined ? null : identityOf(child.pid);
    const kill = () => {
      if (!group) return;
      signalGroup(group, 'SIGTERM');
      setTimeout(() => signalGroup(group, 'SIGKILL'), 5_000).unref();
    };
    end?.addEventListener('abort', kill, { once: true });
    for (const name of ['stdout', 'stderr'] as const) {
      child[name]?.setEncoding('utf8').on('data', (d: string) => {
        if (output[name].length < OUTPUT_CAP) output[name] += d;
      });
    }
    const done = new Promise<{ code: number | null; failed?: string }>((resolve) => {
      child.on('error', (err) => resolve({ code: null, failed: `could not start svc: ${err.message}` }));
      child.on('close', (code) => resolve({ code }));
    }).finally(() => end?.removeEventListener('abort', kill));
    return { output, done, group };
  }

  async function launch(job: ExecJob): Promise<LaunchResult> {
    const end = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const jobSecrets = secretsFor(secrets, job);
    // A held launcher waits at its handoff read: its time limit counts from its word.
    const handed = (job.word ?? Promise.resolve(true)).then((go) => {
      if (!go) {
        end.abort(WITHDRAWN);
        return null;
      }
      timer = setTimeout(() => end.abort(), launchTimeoutMs).unref();
      return jobSecrets;
    });
    // SVC_JOB_ID: a trackera run finds its delivery's payload (engine/spec.ts). Its own process group: a timeout
    // signals the launcher and what it started, and a Ctrl-C on the server's terminal misses the detached runs.
    // A managed (clone=) job's checkout is its own already: a worktree in it would only check its tree out again.
    const args = [...job.repo?.clone ? job.args : isolatedArgs(job.args), '--run-id', job.run];
    const { output, done, group } = startSvc(args, job.workdir, handed, {
      SVC_JOB_ID: job.id, ...(job.origin ? { SVC_ORIGIN: job.origin } : {}),
      // The run is named after the served entry, never after what the checkout's origin says.
      ...(job.repo ? { SVC_REPO_NAME: job.repo.name } : {}),
      ...(job.traceparent ? { SVC_TRACEPARENT: job.traceparent } : {}),
    }, end.signal);
    if (group) job.onLauncher?.(group);
    const { code, failed } = await done;
    clearTimeout(timer);
    if (end.signal.reason === WITHDRAWN) return { exitCode: code, run: null, error: WITHDRAWN };
    if (failed) return { exitCode: null, run: null, error: failed };
    // A run line is printed once the run's worker started (src/cli/start.ts): that run goes on whatever ends the
    // launcher after it (a kill while it sends earlier runs to the Control Plane), so the job follows it, never
    // failing beside a run that then works unwatched.
    const run = parseLaunchOutput(output.stdout);
    if (run) return { exitCode: code, run, error: null };
    // Its last line is cli.ts's `svc start: why`: the command is named once.
    const said = lastLine(output.stderr).replace(/^svc start: /, '') || 'no output';
    const error = end.signal.aborted ? `svc start did not finish within ${launchTimeoutMs} ms`
      : code !== 0 ? `svc start exited with ${code ?? 'a signal'}: ${said}`
      : 'svc start printed no {"source","run"} line';
    return { exitCode: code, run: null, error };
  }

  /**
   * A dead worker's run, whose end was never written nor shipped: `svc start --stop` writes it (failed, class infra),
   * ends what the run left (its provider's group, its sandbox) and sends it to the Control Plane, as a person's stop
   * of such a run does; without it the run stayed `running` there, holding a slot, and its folder said so for ever.
   */
  async function recordEnd(run: RunRef, workdir: string, signal: AbortSignal): Promise<void> {
    // Shutting down already: no listener would hear that, so the stop is left to the restart's re-attach.
    if (signal.aborted) return;
    const deadline = AbortSignal.timeout(launchTimeoutMs);
    const handed = secretsIn(secrets, STOP_SECRETS);
    // A shutdown lets it finish, as it does a launch (only its deadline ends it): one ended midway could have written
    // the run's end and not sent it, and the run stayed `running` on the Control Plane until something shipped again.
    // --worker-lost: a run that never got a worker ends failed as a dead worker's, not `stopped` as a person's stop.
    const stop = startSvc(['start', '--stop', run.run, '--worker-lost'], workdir, handed, {}, deadline);
    const { code, failed } = await stop.done;
    if (code === 0) return;
    const error = failed ?? (deadline.aborted ? `did not finish within ${launchTimeoutMs} ms`
      : `exited with ${code ?? 'a signal'}: ${lastLine(stop.output.stderr) || 'no output'}`);
    log.error('svc start --stop of a run whose worker died failed: the run may still say it is running', {
      run: `${run.source}/${run.run}`, error,
    });
  }

  /** The command a person types, marked as an origin's; after `--` the text is never read as an option. */
  async function answer(run: RunRef, text: string, workdir: string, origin: string): Promise<AnswerResult> {
    const args = ['answer', '--repo', workdir, `--origin=${origin}`, '--', `${run.source}/${run.run}`, text];
    // An answer builds no task: no issue is fetched.
    const { output, done } = startSvc(args, workdir, secretsFor(secrets, null), {});
    const { code, failed } = await done;
    if (code === 0) return { ok: true };
    // Its stderr may name the Control Plane's address: the origin is told only the fixed text of the reason it names.
    const said = output.stdout.split('\n').find((line) => line.startsWith(ORIGIN_REFUSAL_LINE));
    const why = said?.slice(ORIGIN_REFUSAL_LINE.length);
    const reason = why !== undefined && Object.hasOwn(ORIGIN_REFUSALS, why) ? why as OriginRefusal : 'failed';
    const detail = failed ?? (lastLine(output.stderr) || `svc answer exited with ${code ?? 'a signal'}`);
    return { ok: false, reason: ORIGIN_REFUSALS[reason], detail };
  }

  const follow = (run: RunRef, signal: AbortSignal, f: FollowOptions) =>
    followLocalRun(run, signal, f, { pollMs, log, recordEnd });
  return { source: settingOr(opts.env, 'SVC_SOURCE'), launch, follow, answer };
}

function lastLine(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  return oneLine(lines[lines.length - 1] ?? '').slice(0, 300);
}
