// A plan written before, as a later start takes it (docs/engine.md): the worker reads its launcher's, a retry, resume
// or verify an earlier run's; what a plan runs by is judged again against the operator's files as they are now.
import { timingSafeEqual } from 'node:crypto';
import { lstatSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { errorMessage, FailedError, RefusedError } from '../errors.ts';
import { loadPolicyFile } from './policy.ts';
import {
  cappedLimits, decideSettings, loadOperatorConfig, OPERATOR_FILES, readEngineConfigFile, trustOf,
} from './config.ts';
import { isBuiltin, resolveProvider, type ResolvedProvider } from './providers.ts';
import { MAX_PLAN, readOwnFile } from './plain-tree.ts';
import { objOrNull, tryParseJson } from '../untrusted.ts';
import { within } from '../spawn/bwrap-argv.ts';
import { orNull } from '../spawn/tree.ts';
import { resolveSandbox, startedByServer } from '../spawn/sandbox-mode.ts';
import { tryReadState } from './run-state.ts';
import { refuseLinkedMasks } from './safe-fs.ts';
import { runTree } from './paths.ts';
import { localBy, PLAN_MARK_FILE, planMark, policySandbox, refusingToStart, type RunPlan } from './run-plan.ts';

const planPath = (dir: string) => join(dir, 'plan.json');

/**
 * The plan, provided it is svc's own file (readOwnFile: a plan another user planted could, say, run no sandbox) and
 * bears the mark svc on this host made for this folder (planMark: a run's agent writes as the same user, so only the
 * mark tells svc's plan from one it planted). `worktree`: the run's state.json `worktree`, which the mark binds.
 */
export function readPlan(dir: string, env: NodeJS.ProcessEnv, worktree: boolean): RunPlan {
  const bytes = readOwnFile(dir, 'plan.json', MAX_PLAN);
  const plan = bytes === null ? null : objOrNull(tryParseJson(bytes.toString('utf8')));
  const keys = ['policy', 'provider', 'passed_env', 'sandbox', 'push_target', 'notes'];
  if (bytes === null || plan === null || !keys.every((k) => k in plan)) {
    throw new FailedError(`The run has no readable plan (${planPath(dir)}, svc's own file): it was made ` +
      'by an older svc or its folder was changed. Nothing is resolved again for a run made before: retry it ' +
      '(a new run, planned anew when the old one has no plan)');
  }
  // The mark writePlan made for these bytes in this folder (an HMAC-SHA256, in hex): its shape checked first, since
  // timingSafeEqual compares only buffers of one length, then compared in constant time.
  const mark = readOwnFile(dir, PLAN_MARK_FILE, 128)?.toString('utf8').trim();
  const marked = mark !== undefined && /^[0-9a-f]{64}$/.test(mark) &&
    timingSafeEqual(Buffer.from(mark, 'hex'), planMark(env, dir, worktree, bytes));
  if (!marked) throw new UnmarkedPlanError(dir);
  return plan as unknown as RunPlan;
}

/** A plan.json svc on this host did not write for this run folder: nothing a run would do is taken from it. */
class UnmarkedPlanError extends RefusedError {
  constructor(dir: string) {
    super(`Refusing to use the run's plan (${planPath(dir)}): it has no valid mark of svc on this host, so svc ` +
      'cannot tell it from a plan someone else wrote (a run\'s agent can plant a run folder in a repository it ' +
      'makes). The run cannot be resumed, verified, retried or have its pull request opened from this folder, and ' +
      'nothing was changed. A run made by an svc older than plan marks, or moved from another folder or host, is ' +
      'refused the same way: start a new run');
  }
}

/**
 * Refuses (UnmarkedPlanError) the run folder `dir` when its plan.json is there but not svc's, as readPlan would, for
 * a reader that acts on the run before a start of svc reads it (the Control Plane's resume, retry, verify and pull
 * request): a folder without plan.json is its reader's to judge (a retry plans anew).
 */
export function refuseUnmarkedPlan(dir: string, env: NodeJS.ProcessEnv): void {
  if (orNull(() => lstatSync(planPath(dir))) === null) return;
  readPlan(dir, env, tryReadState(dir)?.worktree === true);
}

/**
 * For a retry: the old run's plan, or null (plan the retry anew) when its folder has none at all, or when a server
 * retries a run a person planned: what that person's trusted files allowed is theirs, so the server plans the retry
 * as it plans a new run (docs/engine.md); and when a server's plan runs an operator's provider whose entry changed.
 */
export function planForRetry(dir: string, env: NodeJS.ProcessEnv, old: PlannedRun): RunPlan | null {
  if (orNull(() => lstatSync(planPath(dir))) === null) return null;
  if (startedByServer(env) && readPlan(dir, env, old.worktree).authority !== 'server') return null;
  try {
    // Staying local is the retrying command's choice, as for a new run, not the old run's.
    const { local: _old, ...plan } = planToReuse(dir, env, old);
    return { ...plan, ...localBy(env) };
  } catch (err) {
    if (err instanceof WithdrawnProviderError) return null;
    throw err;
  }
}

/** What of an earlier run's state says where its agent worked, the folder its plan was resolved for. */
type PlannedRun = Parameters<typeof runTree>[0];

/**
 * An earlier run's plan that a retry, resume or verify runs by, refused before the run is queued again when a start of
 * it now would not go as planned (refuseServersBuiltin, refuseWithdrawnProvider: judged with the run's tree as working
 * folder, as planRun resolved the plan). A plan that runs the agent without a sandbox is judged again as a new run
 * would be: a server's run is sandboxed unless the server's own SVC_SERVER_SANDBOX=none says otherwise
 * (resolveSandbox), and a CLI run's "none" counts only by SVC_SANDBOX=none or a policy.json, trusted as it is now, that
 * says so (policySandbox); so a plan made before either rule, or before the operator changed the setting, never takes
 * a run below it. `dir` is the earlier run's folder, `<repo>/.svc/runs/<run>`.
 */
export function planToReuse(dir: string, env: NodeJS.ProcessEnv, run: PlannedRun): RunPlan {
  const plan = readPlan(dir, env, run.worktree);
  refuseServersBuiltin(plan, env, runTree(run));
  refuseWithdrawnProvider(plan, env, runTree(run));
  if (plan.sandbox.kind !== 'none') {
    // The checkout may have changed since the run was made (createRun judged it then).
    if (!run.worktree) refuseLinkedMasks(run.repo_path);
    return plan;
  }
  const server = startedByServer(env);
  const asked = server ? null
    : policySandbox(refusingToStart(() => loadPolicyFile(resolve(dir, '..', '..', '..'))), false, env);
  if (resolveSandbox(asked, env).kind === 'none') return plan;
  const rule = server
    ? 'a run a server starts is sandboxed (only SVC_SERVER_SANDBOX=none in the server\'s environment turns it off)'
    : 'neither SVC_SANDBOX=none nor the project\'s trusted policy.json says so now';
  throw new RefusedError(`Refusing to start: the earlier run's plan (${planPath(dir)}) runs the agent without a ` +
    `sandbox, and ${rule}; start a new run instead`);
}

/**
 * Whether a plan's command provider is the operator's entry as it stands now: the same argv and writable folders as
 * decideSettings resolves that entry to (a name alone is no proof: the operator may have defined it since).
 */
function operatorRunsIt(provider: ResolvedProvider, env: NodeJS.ProcessEnv, workdir: string): boolean {
  const operator = loadOperatorConfig(env);
  if (!Object.hasOwn(operator.providers, provider.name)) return false;
  const pathDirs = (env.PATH ?? '').split(':').filter(isAbsolute);
  const use = { server: true, trusted: false, home: env.HOME || homedir(), workdir, pathDirs };
  const now = orNull(() => resolveProvider(provider.name, decideSettings(null, operator, use).config, env));
  return now !== null &&
    JSON.stringify([now.argv, now.writable]) === JSON.stringify([provider.argv, provider.writable ?? []]);
}

/**
 * Refuses a server's resume or verify (SVC_ORIGIN names a server) of a plan a person made that runs their file's
 * redefinition of a built-in: the built-in would be another agent mid-run.
 */
export function refuseServersBuiltin(plan: RunPlan, env: NodeJS.ProcessEnv, workdir: string): void {
  const { provider } = plan;
  if (!startedByServer(env) || plan.authority === 'server' || provider.kind !== 'command') return;
  if (!isBuiltin(provider.name) || operatorRunsIt(provider, env, workdir)) return;
  throw new RefusedError(`Refusing to start: the run's plan runs .svc/config.json's "${provider.name}" in place of ` +
    'the built-in, as a person trusted; a run a server starts never does: resume or verify it with svc start in ' +
    'the project, or retry it (a new run, planned as the server plans one)');
}

/**
 * Refuses a start of an earlier server's plan whose operator provider (its folder shown, as a repository's own never
 * is under a server) the operator has changed or removed since (operator.json, or the Control Plane's "providers"
 * setting): its argv and folders are the operator's grant, which a copied plan never outlives.
 */
function refuseWithdrawnProvider(plan: RunPlan, env: NodeJS.ProcessEnv, workdir: string): void {
  const { provider } = plan;
  if (plan.authority !== 'server' || provider.kind !== 'command' || provider.showFolder === false) return;
  if (!operatorRunsIt(provider, env, workdir)) throw new WithdrawnProviderError(provider.name);
}

/** A server's plan whose operator provider is not the operator's entry now: a retry plans the run anew. */
class WithdrawnProviderError extends RefusedError {
  constructor(name: string) {
    super(`Refusing to start: the run's plan runs the operator's provider "${name}" as its entry was when the run ` +
      `was planned, and the operator changed or removed that entry since (${OPERATOR_FILES}, or the Control ` +
      'Plane\'s "providers" setting): retry it (a new run, planned anew)');
  }
}

/**
 * The plan a start of it goes by: serverShare's, with its limits within the operator's caps of now (limitsNow) and
 * the environment names the plan passes that the authority that planned it still grants (passedNow).
 */
export function planNow(plan: RunPlan, env: NodeJS.ProcessEnv, workdir: string, repo: string,
  note: (text: string) => void): RunPlan {
  const shared = serverShare(plan, env, workdir, note);
  return { ...shared, policy: limitsNow(shared, env, note), passed_env: passedNow(shared, env, repo, note) };
}

/**
 * The plan's policy with its limits held within the operator's caps as they are at this start: a cap the operator
 * lowered since holds for a resumed, verified or retried run too, each limit lowered said through `note` as a new run's
 * is. An operator's file that cannot be read now refuses the start, as it refuses a new run (there is no cap to leave
 * out).
 */
function limitsNow(plan: RunPlan, env: NodeJS.ProcessEnv, note: (text: string) => void): RunPlan['policy'] {
  const capped = cappedLimits(plan.policy.limits, loadOperatorConfig(env).limits);
  for (const text of capped.notes) note(text);
  return { ...plan.policy, limits: capped.limits };
}

/**
 * The plan's environment names that are granted at this start, as operatorAllowNow judges network grants: the
 * operator's files' `env` now, and for a plan a person made and starts again at the CLI, the `env` of the project's
 * .svc/config.json (`repo`) that they trust as it is now. A name granted since is not taken up: the plan's names are
 * the most it passes. None when the operator's files cannot be read now.
 */
function passedNow(plan: RunPlan, env: NodeJS.ProcessEnv, repo: string, note: (text: string) => void): string[] {
  if (!plan.passed_env.length) return [];
  let granted: string[];
  try {
    granted = loadOperatorConfig(env).env;
  } catch (err) {
    note(`the environment names the plan passes are left out: the operator's configuration cannot be read now ` +
      `(${errorMessage(err)})`);
    return [];
  }
  const file = plan.authority === 'server' || startedByServer(env) ? null : orNull(() => readEngineConfigFile(repo));
  if (file && trustOf(env, file.path, file.sha256) === 'trusted') granted = [...granted, ...file.config.env ?? []];
  const withdrawn = plan.passed_env.filter((name) => !granted.includes(name));
  if (withdrawn.length) {
    note(`env ${withdrawn.join(', ')} left out: no longer in the operator's configuration` +
      (file ? ' or the project\'s trusted .svc/config.json' : ''));
  }
  return plan.passed_env.filter((name) => granted.includes(name));
}

/**
 * The plan a server's start of an earlier run goes by (the Control Plane's resume and verify: SVC_ORIGIN names a
 * server). A plan a person made holds what their trusted files allowed, which is theirs, as for a server's retry
 * (planForRetry): the run goes on with what the server's rule gives a new run, each setting left out said through
 * `note`: the operator's env names, the operator's provider as its entry stands now, and of any other provider the
 * folders inside the run's tree `workdir`, its program file shown alone (refuseServersBuiltin refused earlier a
 * redefined built-in).
 */
export function serverShare(plan: RunPlan, env: NodeJS.ProcessEnv, workdir: string, note: (text: string) => void) {
  if (!startedByServer(env) || plan.authority === 'server') return plan;
  const operator = loadOperatorConfig(env);
  const leftOut = (what: string) => note(`Refused ${what}: a run a server starts again does not use what a person's ` +
    'trusted files allowed (only the operator can grant it, in ' + OPERATOR_FILES + '); the run goes on without it');
  const passed = plan.passed_env.filter((name) => operator.env.includes(name));
  for (const name of plan.passed_env.filter((n) => !passed.includes(n))) leftOut(`env ${name}`);
  const { provider } = plan;
  if (provider.kind !== 'command' || operatorRunsIt(provider, env, workdir)) return { ...plan, passed_env: passed };
  const writable = (provider.writable ?? []).filter((path) => within(path, workdir));
  for (const path of (provider.writable ?? []).filter((p) => !writable.includes(p))) {
    leftOut(`providers.${provider.name}.writable "${path}"`);
  }
  return { ...plan, passed_env: passed, provider: { ...provider, writable, showFolder: false } };
}

/**
 * The plan's operator network grants that the operator's configuration still holds at this start: a retried, resumed
 * or verified run copies an earlier plan, and a grant the operator has withdrawn since must open nothing (as writable
 * folders, judged again at each start). An operator.json that cannot be read now keeps none.
 */
export function operatorAllowNow(plan: RunPlan, env: NodeJS.ProcessEnv, note: (text: string) => void): string[] {
  const granted = plan.operator_allow ?? [];
  if (!granted.length) return [];
  let current: string[];
  try {
    current = loadOperatorConfig(env).network;
  } catch (err) {
    note(`the operator's network grants are left out: its configuration cannot be read now (${errorMessage(err)})`);
    return [];
  }
  const withdrawn = granted.filter((entry) => !current.includes(entry));
  if (withdrawn.length) {
    note(`operator network.allow ${withdrawn.join(', ')} left out: no longer in the operator's configuration`);
  }
  return granted.filter((entry) => current.includes(entry));
}
