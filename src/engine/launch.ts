// Makes a run (id, folder, spec, queued state) and starts its worker as a detached process group of its own.
import { WORKER_SECRET_NAMES } from '../spawn/env.ts';
import { workerArgv } from '../spawn/start-argv.ts';
import { existsSync, mkdirSync, closeSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startChild } from '../spawn/start.ts';
import { secretsIn, withoutSecrets, handoffPipe, sendHandoff, type Secrets } from '../spawn/secrets-handoff.ts';
import { createHash } from 'node:crypto';
import { BadInputError, RefusedError } from '../errors.ts';
import { classifyInput, isWebhookOrigin } from './classify.ts';
import { buildTask } from './spec.ts';
import { refuseOutsideView, runSettings } from './run-settings.ts';
import { loadPolicy, PolicyError } from './policy.ts';
import { newRunId, isValidSegment } from './ids.ts';
import { repoRoot, headSha, currentBranch, excludeEngineFolders, gitCommonDir } from './git.ts';
import { runDir, artifactsDir } from './paths.ts';
import { isRoutedRepoName, runRepoName } from './repo-name.ts';
import { adoptRepoName, type RepoRename } from './repo-rename.ts';
import { assertCheckoutFree, startingTree } from './checkout-start.ts';
import { writeState, readState, type RunState, type InputKind, type WorkerMode } from './run-state.ts';
import { isoNow } from '../iso-time.ts';
import { openEventLog } from './events-log.ts';
import { identityOf } from './proc-group.ts';
import { assertPlainDir, openAppendNoFollow, writeNoFollow } from './safe-fs.ts';
import { resolveSandbox, unsandboxedWarning, probeDone } from '../spawn/sandbox-mode.ts';
import { pinPushTarget, PushRefusedError, type PushTarget } from './git-push.ts';
import { checkPrPossible } from './pr-check.ts';
import { signsLater } from './evidence.ts';

/**
 * Refuses (a SvcError: unavailable or refused) a run whose agents cannot be sandboxed as its policy and origin require
 * (DESIGN §7a), before
 * anything is written; returns the loud warning for a run that opted out, else null.
 */
export function sandboxPreflight(repo: string, env: NodeJS.ProcessEnv): string | null {
  try {
    return unsandboxedWarning(resolveSandbox(loadPolicy(repo).sandbox, env));
  } catch (err) {
    if (err instanceof PolicyError) throw new RefusedError(`Refusing to start: ${err.message}`, { cause: err });
    throw err;
  }
}

/**
 * Where a --pr run will push, read now, before any agent can touch the repository's config; null when the run opens
 * no pull request. Throws PushRefusedError when the config names no single origin or holds redirecting rules.
 */
export function pushTargetFor(repo: string, pr: boolean): PushTarget | null {
  if (!pr || loadPolicy(repo).pr.open === 'never') return null;
  return pinPushTarget(repo);
}

export interface StartOptions {
  input: string;
  forceBrief: boolean;
  pr: boolean;
  worktree: boolean;
  provider: string | null;
  repo: string;
  runId: string | null;
  env: NodeJS.ProcessEnv;
}

export function resolveRepo(dir: string): string {
  try {
    return repoRoot(dir);
  } catch (err) {
    throw new BadInputError(`Not a git repository: "${dir}" (${(err as Error).message})`);
  }
}

/**
 * Checks provider and policy up front so a bad setup fails the command, not a detached worker nobody watches: the
 * provider under the settings rule (an untrusted file's widening settings refuse a CLI run), and, sandboxed, that a
 * command provider names nothing its sandbox would not show. `worktree`: the run will work in a worktree of its own.
 */
function preflight(repo: string, provider: string | null, env: NodeJS.ProcessEnv, worktree: boolean): string {
  try {
    const policy = loadPolicy(repo);
    const workdir = worktree ? join(repo, '.svc', 'worktrees', 'new-run') : repo;
    const settings = runSettings(provider, repo, workdir, env);
    if (resolveSandbox(policy.sandbox, env).kind === 'bwrap') refuseOutsideView(settings.provider, repo, workdir, env);
    return settings.provider.name;
  } catch (err) {
    if (err instanceof PolicyError) throw new RefusedError(`Refusing to start: ${err.message}`, { cause: err });
    throw err;
  }
}

interface NewRun {
  repo: string;
  run: string;
  groupId: string | null;
  spec: string;
  brief: string;
  origin: string;
  provider: string;
  pr: boolean;
  worktree: boolean;
  input: { kind: InputKind; value: string };
  env: NodeJS.ProcessEnv;
}

/** A new run's folder and state, and the rename of the checkout's earlier runs this run's name caused (if any). */
export interface PreparedRun {
  dir: string;
  state: RunState;
  renamed: RepoRename | null;
}

function createRun(n: NewRun): PreparedRun {
  if (!isValidSegment(n.run)) throw new BadInputError(`Run id "${n.run}" is not a valid path segment`);
  const dir = runDir(n.repo, n.run);
  if (existsSync(dir)) throw new BadInputError(`Run ${n.run} already exists in ${n.repo}`);
  sandboxPreflight(n.repo, n.env);
  let pushTarget: PushTarget | null;
  try {
    pushTarget = pushTargetFor(n.repo, n.pr);
  } catch (err) {
    if (err instanceof PushRefusedError) {
      throw new RefusedError(`Refusing to start a --pr run: ${err.message}`, { cause: err });
    }
    throw err;
  }
  const gitDir = gitCommonDir(n.repo);
  excludeEngineFolders(gitDir);
  let base: string;
  try {
    base = headSha(n.repo);
  } catch {
    throw new BadInputError(`The repository at "${n.repo}" has no commits yet; commit something first`);
  }
  const isolated = n.worktree || n.pr;
  if (!isolated) assertCheckoutFree(n.repo);
  const start = isolated ? null : startingTree(n.repo);
  mkdirSync(artifactsDir(dir), { recursive: true });
  assertPlainDir(dir);
  writeNoFollow(join(dir, 'spec.md'), n.spec);
  const now = isoNow();
  const source = n.env.SVC_SOURCE && isValidSegment(n.env.SVC_SOURCE) ? n.env.SVC_SOURCE : 'local';
  const name = runRepoName(n.repo, n.env);
  // A name the trigger routed (SVC_REPO_NAME) is the served entry's, not the checkout's: it renames nothing.
  const renamed = isRoutedRepoName(n.env) ? null : adoptRepoName(n.repo, gitDir, name);
  const state: RunState = {
    source, run: n.run, repo: name, group_id: n.groupId ?? n.run, status: 'queued', verdict: null,
    brief: n.brief, origin: n.origin, provider: n.provider, branch: isolated ? `svc/${n.run}` : currentBranch(n.repo),
    pr_url: null, question: null, started_at: now, ended_at: null, updated_at: now, cost_usd: null, tokens_in: null,
    tokens_out: null, exit_code: null, error: null, repo_path: n.repo, input: n.input, workdir: n.repo,
    worktree: isolated, pr: n.pr, base_sha: base, base_tree: start?.tree ?? null, head_sha: null,
    spec_sha256: createHash('sha256').update(n.spec).digest('hex'), pid: null, pgid: null, proc_start: null,
    budget_usd: null, child: null, answers: [], base_branch: currentBranch(n.repo), push_target: pushTarget,
  };
  writeState(dir, state);
  const events = openEventLog(dir);
  events.append('run.status', { from: null, to: 'queued' });
  if (start?.dirty) events.append('log', { stream: 'svc', text: start.dirty });
  return { dir, state, renamed };
}

/**
 * A --pr run is refused before anything is written when its pull request could not be opened: no GitHub credential,
 * or an origin that does not answer as configured (src/engine/pr-check.ts). A config that names no single origin is
 * left for createRun to refuse with its own fix.
 */
async function prPreflight(repo: string, pr: boolean, env: NodeJS.ProcessEnv): Promise<void> {
  // A Kubernetes pod's run container holds no GitHub credential by design: its signer container opens the PR.
  if (signsLater(env)) return;
  let target: PushTarget | null;
  try {
    target = pushTargetFor(repo, pr);
  } catch (err) {
    if (err instanceof PushRefusedError) return;
    throw err;
  }
  if (target === null) return;
  try {
    await checkPrPossible(target, env);
  } catch (err) {
    if (err instanceof RefusedError) {
      throw new RefusedError(`Refusing to start a --pr run: ${err.message} (nothing was started)`, { cause: err });
    }
    throw err;
  }
}

export async function prepareRun(opts: StartOptions): Promise<PreparedRun> {
  const repo = resolveRepo(opts.repo);
  const confineTo = isWebhookOrigin(opts.env.SVC_ORIGIN) ? repo : null;
  const input = classifyInput(opts.input, { forceBrief: opts.forceBrief, cwd: process.cwd(), confineTo });
  const task = await buildTask(input, repo, opts.env);
  const provider = preflight(repo, opts.provider, opts.env, opts.worktree || opts.pr);
  await prPreflight(repo, opts.pr, opts.env);
  return createRun({
    repo, run: opts.runId ?? newRunId(), groupId: null, ...task, provider, pr: opts.pr, worktree: opts.worktree,
    input: { kind: input.kind, value: input.kind === 'brief' ? task.brief : input.value }, env: opts.env,
  });
}

/** A new run in the same group with the same spec, provider and flags (DESIGN §3: retry never changes the old run). */
export async function prepareRetry(
  repoDir: string, oldRun: string, newRun: string | null, env: NodeJS.ProcessEnv,
): Promise<PreparedRun> {
  const repo = resolveRepo(repoDir);
  const oldDir = runDir(repo, oldRun);
  if (!existsSync(oldDir)) throw new BadInputError(`No run ${oldRun} in ${repo}`);
  const old = readState(oldDir);
  const provider = preflight(repo, old.provider, env, old.worktree);
  await prPreflight(repo, old.pr, env);
  return createRun({
    repo, run: newRun ?? newRunId(), groupId: old.group_id, spec: readFileSync(join(oldDir, 'spec.md'), 'utf8'),
    brief: old.brief, origin: old.origin, provider, pr: old.pr, worktree: old.worktree, input: old.input,
    env: { ...env, SVC_SOURCE: old.source },
  });
}


/** What the worker itself uses: the push token, the Control Plane token for ingest, the issue fetchers' keys. */
function workerSecrets(env: NodeJS.ProcessEnv): Secrets {
  const all = secretsIn(env);
  return Object.fromEntries(WORKER_SECRET_NAMES.filter((n) => all[n]).map((n) => [n, all[n]!]));
}

/** Spawns `svc start --worker MODE --run-id RUN --repo REPO` detached; output goes to runner.log unless inherited. */
export function spawnWorker(
  cli: string, state: RunState, mode: WorkerMode, env: NodeJS.ProcessEnv, inherit: boolean,
): ReturnType<typeof startChild> {
  const dir = runDir(state.repo_path, state.run);
  const log = inherit ? null : openAppendNoFollow(join(dir, 'runner.log'));
  const argv = workerArgv(cli, mode, state.run, state.repo_path);
  // The worker is an ancestor of the agent: its environment holds no secret value; the credentials it uses itself
  // (push, ingest) and the sandbox probe this process already ran arrive in a pipe on its fd 3, which it reads to the
  // end and closes before the provider starts (DESIGN §7a).
  const pipe = handoffPipe(inherit ? ['ignore', 'inherit', 'inherit'] : ['ignore', log!, log!]);
  const child = startChild(argv, {
    cwd: state.repo_path,
    kind: 'svc-worker',
    base: withoutSecrets(env),
    extra: { SVC_SOURCE: state.source, ...pipe.extra },
    detached: true,
    stdio: pipe.stdio,
  });
  sendHandoff(child, { secrets: workerSecrets(env), probe: probeDone() });
  if (log !== null) closeSync(log);
  if (child.pid && mode !== 'verify') {
    // Recorded before the worker runs, so a stop that comes right away can still find it.
    const fresh = readState(dir);
    writeState(dir, { ...fresh, ...identityOf(child.pid) });
  }
  return child;
}
