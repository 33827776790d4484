// A run's plan: everything the run may do, resolved once by its launcher and kept as plan.json.
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { errorMessage, FailedError, RefusedError } from '../errors.ts';
import { loadPolicyFile, PolicyError, type Policy } from './policy.ts';
import {
  cappedLimits, decideSettings, loadOperatorConfig, OPERATOR_FILES, readEngineConfigFile, serverRefusal, trustNeeded,
  trustOf, TrustNeededError,
} from './config.ts';
import { isBuiltin, resolveProvider, type ResolvedProvider } from './providers.ts';
import { pinPushTarget, PushRefusedError, type PushTarget } from './git-push.ts';
import { git } from './git.ts';
import { openRunDir, withDir, writeJsonAtomic } from './safe-fs.ts';
import { MAX_PLAN, pathIn, readOwnObject } from './plain-tree.ts';
import { agentSandboxPlan } from '../spawn/agent-plan.ts';
import { refuseSystemHome, shownBy, within } from '../spawn/bwrap-argv.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { orNull } from '../spawn/tree.ts';
import {
  ignoredPolicyNote, resolveSandbox, sandboxOptOut, startedByServer, type SandboxMode,
} from '../spawn/sandbox-mode.ts';
import { setting, settingChoice } from '../settings-registry.ts';
import { providerHomeKey } from './sandbox.ts';

/** A CLI run's repository file asks for operator-only settings and the person has not trusted this exact file. */
export interface RunPlan {
  /** The project's policy as it was when the run was made, its limits held within the operator's caps. */
  policy: Policy;
  /** The provider, its program found on PATH, with what the settings rule allowed it (writable folders). */
  provider: ResolvedProvider;
  /** Names of svc's environment passed to the agent and the checks; the values come from the worker's environment. */
  passed_env: string[];
  /** The operator's network.allow (operator.json): the gate adds it to the repository's list, and only these entries
   * may open an address the gate refuses (DESIGN §7a). Absent in a plan an older svc made: none. */
  operator_allow?: string[];
  /** Whether the agents are confined, and by which bwrap (DESIGN §7a). */
  sandbox: SandboxMode;
  /** Whose rule made it: a server's, or a person's at the CLI (whose trusted files may widen it). Absent in a plan an
   * older svc made: a person's. */
  authority?: 'server' | 'person';
  /** A trigger-routed run's provider home key (sandbox.ts providerHomeKey: its served name's), for a built-in CLI: a
   * resume, retry or verify, whoever asks for it (the Control Plane's launcher has no SVC_REPO_NAME), finds the
   * session state the run's CLI kept there. Absent for any other run, and in a plan an older svc made: resolved from
   * the worker's environment. */
  provider_home?: string;
  /** A --pr run's origin, read before any agent ran (git-push.ts); null for a run that opens no pull request. */
  push_target: PushTarget | null;
  /** For the run's log: settings left out, limits lowered, a policy's sandbox opt-out ignored. */
  notes: string[];
  /** Made with SVC_SHIP=0: no worker, command or recovery ships it, only `svc ship` naming it (keptLocal). */
  local?: true;
}

/** Resolves the plan, or refuses a run that could not go as asked (a broken policy, an untrusted file's settings, no
 * working sandbox, a command provider naming a file its sandbox hides, a --pr run with no origin). */
export function planRun(req: {
  repo: string;
  /** Where the run will work: a folder inside it is the run's own. */
  workdir: string;
  /** --provider, else the config's, else the first built-in on PATH. */
  provider: string | null;
  pr: boolean;
  env: NodeJS.ProcessEnv;
  /** Whether the run's name is the one a trigger server routed: createRun (launch.ts) asks, not the plan. */
  routed: boolean;
}): RunPlan {
  const { repo, env } = req;
  return refusingToStart(() => {
    const policyFile = loadPolicyFile(repo);
    const { policy } = policyFile;
    const file = readEngineConfigFile(repo);
    const operator = loadOperatorConfig(env);
    const server = startedByServer(env);
    const trust = !server && file !== null ? trustOf(env, file.path, file.sha256) : null;
    const decided = decideSettings(file?.config ?? null, operator, {
      server, trusted: trust === 'trusted', home: env.HOME || homedir(),
      workdir: req.workdir, pathDirs: (env.PATH ?? '').split(':').filter(isAbsolute),
    });
    const provider = resolveProvider(req.provider, decided.config, env);
    // The provider's own settings and the file-wide ones (`env`) matter to this run.
    const widening = decided.widening.filter((w) => w.provider === null || w.provider === provider.name);
    if (widening.length && !server && file) {
      throw new TrustNeededError(trustNeeded(widening, file.path, trust === 'changed'));
    }
    const asked = policySandbox(policyFile, server, env);
    const optedOut = sandboxOptOut(asked, env);
    // Refused here, before a run is made, as well as by every sandbox it would start; and before the probe, which
    // keeps its result under HOME (a HOME of `/` would get a /.svc).
    if (!optedOut) refuseSystemHome(env.HOME || homedir());
    const sandbox = optedOut ?? resolveSandbox(asked, env);
    if (sandbox.kind === 'bwrap') refuseOutsideView(provider, repo, req.workdir, env);
    const capped = cappedLimits(policy.limits, operator.limits);
    const ignored = ignoredPolicyNote(policy.sandbox, env) ?? [];
    return {
      policy: { ...policy, limits: capped.limits }, provider, passed_env: decided.env, sandbox,
      ...req.routed && provider.kind !== 'command' ? { provider_home: providerHomeKey(repo, env) } : {},
      authority: server ? 'server' : 'person',
      operator_allow: operator.network,
      push_target: req.pr && policy.pr.open !== 'never' ? pinPushTarget(repo) : null,
      notes: [...decided.notes, ...server ? widening.map(serverRefusal) : [], ...capped.notes].concat(ignored),
      ...localBy(env),
    };
  });
}

/** `load`'s broken policy, or an origin a --pr run cannot push to, said as a refusal to start. */
function refusingToStart<T>(load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof PolicyError) throw new PolicyError(`Refusing to start: ${err.message}`, { cause: err });
    if (err instanceof PushRefusedError) {
      throw new RefusedError(`Refusing to start a --pr run: ${err.message}`, { cause: err });
    }
    throw err;
  }
}

/**
 * The policy's sandbox setting as the run may use it (DESIGN §7a): a CLI run's "none" counts only once the person
 * trusted that exact policy.json (`svc trust`) or said SVC_SANDBOX=none themselves; a server's run ignores it anyway
 * (resolveSandbox), since a repository's policy is written by whoever can push to it, the agent included.
 */
function policySandbox(file: ReturnType<typeof loadPolicyFile>, server: boolean, env: NodeJS.ProcessEnv) {
  const asked = file.policy.sandbox;
  if (server || asked !== 'none' || settingChoice(env, 'SVC_SANDBOX') === 'none') return asked;
  const trust = file.sha256 === null ? null : trustOf(env, file.path, file.sha256);
  if (trust === 'trusted') return asked;
  const widening = [{ provider: null, setting: 'sandbox', what: '"none"' }];
  throw new TrustNeededError(trustNeeded(widening, file.path, trust === 'changed', 'set SVC_SANDBOX=none yourself'));
}

const planPath = (dir: string) => join(dir, 'plan.json');

/** Written by the launcher, beside state.json, before the run's worker starts; never changed after. */
export function writePlan(dir: string, plan: RunPlan): void {
  withDir(openRunDir(dir), (run) => writeJsonAtomic(pathIn(run, 'plan.json'), plan));
}

/** Refuses, before the run is made, a plan larger (as writeJsonAtomic writes it) than readPlan reads back. */
export function refuseOversizedPlan(plan: RunPlan): void {
  const size = Buffer.byteLength(JSON.stringify(plan, null, 2)) + 1;
  if (size <= MAX_PLAN) return;
  throw new RefusedError(`Refusing to start: the run's plan would be ${size} bytes, more than the ${MAX_PLAN} ` +
    'svc reads back (the operator\'s network.allow, env or providers in operator.json make it that large)');
}

/** The plan, provided it is svc's own file (readOwnObject: a plan another user planted could, say, run no sandbox). */
export function readPlan(dir: string): RunPlan {
  const plan = readOwnObject(dir, 'plan.json', MAX_PLAN);
  const keys = ['policy', 'provider', 'passed_env', 'sandbox', 'push_target', 'notes'];
  if (plan === null || !keys.every((k) => k in plan)) {
    throw new FailedError(`The run has no readable plan (${planPath(dir)}, svc's own file): it was made ` +
      'by an older svc or its folder was changed. Nothing is resolved again for a run made before: retry it ' +
      '(a new run, planned anew when the old one has no plan)');
  }
  return plan as unknown as RunPlan;
}

/**
 * For a retry: the old run's plan, or null (plan the retry anew) when its folder has none at all, or when a server
 * retries a run a person planned: what that person's trusted files allowed is theirs, so the server plans the retry
 * as it plans a new run (docs/engine.md).
 */
export function planForRetry(dir: string, env: NodeJS.ProcessEnv): RunPlan | null {
  if (orNull(() => lstatSync(planPath(dir))) === null) return null;
  if (startedByServer(env) && readPlan(dir).authority !== 'server') return null;
  // Staying local is the retrying command's choice, as for a new run, not the old run's.
  const { local: _old, ...plan } = planToReuse(dir, env);
  return { ...plan, ...localBy(env) };
}

/** A plan's `local` as the command's SVC_SHIP sets it: 0 keeps the run local, any other value ships it. */
function localBy(env: NodeJS.ProcessEnv): Pick<RunPlan, 'local'> {
  return setting(env, 'SVC_SHIP') === '0' ? { local: true } : {};
}

/**
 * An earlier run's plan that a retry, resume or verify runs by. A plan that runs the agent without a sandbox is judged
 * again as a new run would be: a server's run is sandboxed unless the server's own SVC_SERVER_SANDBOX=none says
 * otherwise (resolveSandbox), and a CLI run's "none" counts only by SVC_SANDBOX=none or a policy.json, trusted as it
 * is now, that says so (policySandbox); so a plan made before either rule, or before the operator changed the setting,
 * never takes a run below it. `dir` is the earlier run's folder, `<repo>/.svc/runs/<run>`.
 */
export function planToReuse(dir: string, env: NodeJS.ProcessEnv): RunPlan {
  const plan = readPlan(dir);
  if (plan.sandbox.kind !== 'none') return plan;
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

/** The warning a person sees (the launcher's stderr) and the run's log records (the worker) for an unconfined plan. */
export function unsandboxedWarning(mode: SandboxMode): string | null {
  if (mode.kind !== 'none') return null;
  // A plan.json svc did not write (an older svc, a hand edit) may give no reason: the warning still reads as one.
  const why = typeof mode.why === 'string' && mode.why !== '' ? mode.why : 'the run\'s plan says so';
  return `WARNING: the agent runs WITHOUT a sandbox (${why}): it can read everything this user can, ` +
    'including svc\'s keys and tokens. svc still ends every process it starts when the provider exits.';
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
  try {
    const now = resolveProvider(provider.name, decideSettings(null, operator, use).config, env);
    return JSON.stringify([now.argv, now.writable]) === JSON.stringify([provider.argv, provider.writable ?? []]);
  } catch {
    return false;
  }
}

/**
 * Refuses a server's resume or verify (SVC_ORIGIN names a server) of a plan a person made that runs their file's
 * redefinition of a built-in: the built-in would be another agent mid-run. Asked before the run is queued again.
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

/** Programs whose first argument that is not an option is the script they run: the one file beside argv[0] checked
 * (after `-c` or `-e` it is code, which names no file of the checkout, so checking it refuses nothing). */
const INTERPRETERS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'node', 'deno', 'bun', 'python', 'python3', 'ruby',
  'perl']);

/**
 * Refuses a command provider naming a file of the checkout that is not committed when the run works in a worktree
 * made at `base`, which holds only what is committed there: there the provider found no such file and the run said
 * only "Provider x exited with code 2". Only what the provider runs is checked, argv[0] and an interpreter's script
 * (another argument may be a data file the agent makes or an ignored one); a program on PATH (argv[0] without "/")
 * and a file outside the repository (through a link too) are no file of the checkout.
 */
export function refuseUncommitted(provider: ResolvedProvider, repo: string, base: string, job = false): void {
  if (provider.kind !== 'command') return;
  const [program, ...args] = provider.argv;
  const script = args.find((arg) => !arg.startsWith('-'));
  const interpreted = INTERPRETERS.has(basename(program ?? '')) && script !== undefined;
  const root = realpathSync(repo);
  const missing = [...program?.includes('/') ? [program] : [], ...interpreted ? [script] : []].find((arg) => {
    if (isAbsolute(arg)) return false;
    const real = orNull(() => realpathSync(join(repo, arg)));
    if (real === null) return false;
    const path = relative(root, real);
    if (path.startsWith('..') || isAbsolute(path) || !statSync(real).isFile()) return false;
    try {
      git(repo, ['cat-file', '-e', `${base}:${path}`]);
      return false;
    } catch {
      return true;
    }
  });
  if (missing === undefined) return;
  const refused = `Refusing to start: provider "${provider.name}" names ${missing}, which is not committed, and `;
  const commit = `(git add ${missing} && git commit)`;
  // A trigger server's job always works in a worktree (trigger/executor.ts), of the served checkout or, for a clone=
  // job, of a checkout made from the remote: leaving out --worktree is no way out; a clone= job has no served checkout.
  throw new RefusedError(job
    ? `${refused}a trigger server's job works in a worktree of the served checkout, which holds only what is ` +
      `committed (a clone= job: of a checkout made from the remote, which holds only what is pushed). Commit it in ` +
      `the served checkout ${commit}; for a clone= job, commit it and push it to the remote the job clones`
    : `${refused}a --worktree or --pr run's working tree holds only what is committed. Commit it ${commit}, or ` +
      'start without --worktree and --pr');
}

/** Refuses a command provider whose absolute-path arguments its sandbox would not show (there: "No such file"). */
function refuseOutsideView(provider: ResolvedProvider, repo: string, workdir: string, env: NodeJS.ProcessEnv): void {
  if (provider.kind !== 'command') return;
  // The protocol folders do not exist yet; the plan only needs their names.
  const io = join(workdir, '.svc-io');
  const plan = agentSandboxPlan({
    workdir, repo, ioDir: io, askDir: io, answerDir: io,
    svcHome: svcHomeOf(env), home: env.HOME || homedir(), provider: 'command', declared: provider.writable ?? [],
    program: provider.argv[0]!, showProgramFolder: provider.showFolder !== false, env, gate: null,
  });
  const missing = provider.argv.slice(1).find((arg) => isAbsolute(arg) && !shownBy(plan, arg));
  if (!missing) return;
  throw new RefusedError(
    `Refusing to start: provider "${provider.name}" names ${missing}, which its sandbox does not show (it sees the ` +
      'working tree, the folders on PATH, the system folders and its own program\'s folder). Put the script in the ' +
      'repository and name it relative to it (e.g. ["sh", ".svc/agent.sh"]; a --worktree run sees what is ' +
      'committed), or install it in a folder on PATH',
  );
}
