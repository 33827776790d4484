// A run's plan: everything the run may do, resolved once by its launcher, kept as plan.json (plan-reuse.ts reads it).
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { FailedError, RefusedError } from '../errors.ts';
import { loadPolicyFile, PolicyError, type Policy } from './policy.ts';
import {
  cappedLimits, decideSettings, loadOperatorConfig, readEngineConfigFile, serverRefusal, trustNeeded, trustOf,
  TrustNeededError,
} from './config.ts';
import { resolveProvider, type ResolvedProvider } from './providers.ts';
import { pinPushTarget, PushRefusedError, type PushTarget } from './git-push.ts';
import { git } from './git.ts';
import { openRunDir, withDir } from './safe-fs.ts';
import { writeFileAtomic } from '../atomic-write.ts';
import { projectOf } from './paths.ts';
import { MAX_PLAN, pathIn } from './plain-tree.ts';
import { agentSandboxPlan } from '../spawn/agent-plan.ts';
import { hiddenHolding, refuseSystemHome, shownBy } from '../spawn/bwrap-argv.ts';
import { homeOf, svcHomeOf } from '../spawn/svc-paths.ts';
import { orNull, realOrNull } from '../spawn/tree.ts';
import {
  ignoredPolicyNote, resolveSandbox, sandboxOptOut, startedByServer, type SandboxMode,
} from '../spawn/sandbox-mode.ts';
import { settingChoice } from '../settings-registry.ts';
import { providerHomeKey } from './sandbox.ts';

/** What a run may do, as its launcher resolved it; its worker, a retry, resume or verify go by it (plan-reuse.ts). */
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
      server, trusted: trust === 'trusted', home: homeOf(env),
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
    if (!optedOut) refuseSystemHome(homeOf(env));
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
export function refusingToStart<T>(load: () => T): T {
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
export function policySandbox(file: ReturnType<typeof loadPolicyFile>, server: boolean, env: NodeJS.ProcessEnv) {
  const asked = file.policy.sandbox;
  if (server || asked !== 'none' || settingChoice(env, 'SVC_SANDBOX') === 'none') return asked;
  const trust = file.sha256 === null ? null : trustOf(env, file.path, file.sha256);
  if (trust === 'trusted') return asked;
  const widening = [{ provider: null, setting: 'sandbox', what: '"none"' }];
  throw new TrustNeededError(trustNeeded(widening, file.path, trust === 'changed', 'set SVC_SANDBOX=none yourself'));
}

/** Written by the launcher, beside state.json, before the run's worker starts, with its mark (planMark below), which
 * readPlan checks; never changed after. `worktree`: the run's state.json `worktree`, which the mark binds. */
export function writePlan(dir: string, plan: RunPlan, worktree: boolean, env: NodeJS.ProcessEnv): void {
  const bytes = Buffer.from(JSON.stringify(plan, null, 2) + '\n');
  const mark = planMark(env, dir, worktree, bytes).toString('hex') + '\n';
  withDir(openRunDir(dir), (run) => {
    writeFileAtomic(pathIn(run, 'plan.json'), bytes, 0o644);
    writeFileAtomic(pathIn(run, PLAN_MARK_FILE), mark, 0o644);
  });
}

/** Refuses, before the run is made, a plan larger (as writePlan writes it) than readPlan reads back. */
export function refuseOversizedPlan(plan: RunPlan): void {
  const size = Buffer.byteLength(JSON.stringify(plan, null, 2)) + 1;
  if (size <= MAX_PLAN) return;
  throw new RefusedError(`Refusing to start: the run's plan would be ${size} bytes, more than the ${MAX_PLAN} ` +
    'svc reads back (the operator\'s network.allow, env or providers in operator.json make it that large)');
}

/** A plan's `local` as the command's SVC_SHIP sets it: 0 keeps the run local, 1 (the default) ships it. */
export function localBy(env: NodeJS.ProcessEnv): Pick<RunPlan, 'local'> {
  return settingChoice(env, 'SVC_SHIP') === '0' ? { local: true } : {};
}

/** The warning a person sees (the launcher's stderr) and the run's log records (the worker) for an unconfined plan. */
export function unsandboxedWarning(mode: SandboxMode): string | null {
  if (mode.kind !== 'none') return null;
  // A plan.json svc did not write (an older svc, a hand edit) may give no reason: the warning still reads as one.
  const why = typeof mode.why === 'string' && mode.why !== '' ? mode.why : 'the run\'s plan says so';
  return `WARNING: the agent runs WITHOUT a sandbox (${why}): it can read everything this user can, ` +
    'including svc\'s keys and tokens. svc still ends every process it starts when the provider exits.';
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
    return orNull(() => git(repo, ['cat-file', '-e', `${base}:${path}`])) === null;
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

/** Refuses a command provider whose program or absolute-path arguments its sandbox would not show (there: "No such
 * file", or for the program exit 127, "not found"). */
function refuseOutsideView(provider: ResolvedProvider, repo: string, workdir: string, env: NodeJS.ProcessEnv): void {
  if (provider.kind !== 'command') return;
  const [program = '', ...args] = provider.argv;
  // The protocol folders do not exist yet; the plan only needs their names.
  const io = join(workdir, '.svc-io');
  const plan = agentSandboxPlan({
    workdir, repo, ioDir: io, askDir: io, answerDir: io,
    svcHome: svcHomeOf(env), home: homeOf(env), provider: 'command', declared: provider.writable ?? [],
    program, showProgramFolder: provider.showFolder !== false, env, gate: null,
  });
  // The program too, as the path it runs by and the file a link leads to: agent-plan.ts shows no folder that holds
  // HOME (its whole view would show HOME's other contents) and nothing in a hidden one.
  const unshown = (isAbsolute(program) ? [program, realOrNull(program) ?? program] : []).find((p) => !shownBy(plan, p));
  if (unshown !== undefined) {
    const hidden = hiddenHolding(plan, unshown);
    const why = hidden === undefined ? `its folder ${dirname(unshown)} holds HOME (${plan.home}), and no folder ` +
      'that holds HOME is shown whole' : `${hidden} is hidden`;
    throw new RefusedError(`Refusing to start: provider "${provider.name}" runs ${program}` +
      `${unshown === program ? '' : ` (${unshown})`}, which its sandbox does not show: ${why}. Install it elsewhere ` +
      '(e.g. /usr/local/bin or /opt/<name>/bin: not in a folder that holds HOME, nor in one the sandbox hides)');
  }
  const missing = args.find((arg) => isAbsolute(arg) && !shownBy(plan, arg));
  if (!missing) return;
  throw new RefusedError(
    `Refusing to start: provider "${provider.name}" names ${missing}, which its sandbox does not show (it sees the ` +
      'working tree, the folders on PATH, the system folders and its own program\'s folder). Put the script in the ' +
      'repository and name it relative to it (e.g. ["sh", ".svc/agent.sh"]; a --worktree run sees what is ' +
      'committed), or install it in a folder on PATH',
  );
}

// A plan's mark: an HMAC-SHA256, with a key only svc on this host holds (~/.svc/keys, never in a sandbox's view), over
// plan.json's exact bytes and where the run works. An agent writes files as the person, so no owner check tells a
// plan svc wrote from one it planted (docs/engine.md "The run's plan"); only the mark does. Never shown to anyone.
export const PLAN_MARK_FILE = 'plan.mark';
const KEY_BYTES = 32;

/**
 * The key that marks plans, `~/.svc/keys/plan-hmac.key` (keys.ts's folder, not imported: a plain start loads no key
 * module), made on first use, 0600 in a 0700 folder. Of two processes that make it at once, the first one linked in
 * is the key every mark is checked with.
 */
function planKey(env: NodeJS.ProcessEnv): Buffer {
  const dir = join(svcHomeOf(env), 'keys');
  const path = join(dir, 'plan-hmac.key');
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const made = `${path}.${process.pid}.new`;
    try {
      writeFileAtomic(made, randomBytes(KEY_BYTES), 0o600);
      // link(2) never replaces a key already there.
      linkSync(made, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      rmSync(made, { force: true });
    }
  }
  const key = readFileSync(path);
  if (key.length !== KEY_BYTES) throw new FailedError(`svc's plan key ${path} is not ${KEY_BYTES} bytes`);
  return key;
}

/**
 * The mark of `plan` (plan.json's bytes) for the run folder `dir`: bound to the project's real path, the run's id and
 * whether it works in a worktree, which together say where its agent works (paths.ts runTree), so a plan copied into
 * another folder, or a state.json that moves the run, is not marked.
 */
export function planMark(env: NodeJS.ProcessEnv, dir: string, worktree: boolean, plan: Buffer): Buffer {
  const project = projectOf(dir);
  const where = JSON.stringify([realOrNull(project) ?? project, basename(dir), worktree]);
  return createHmac('sha256', planKey(env)).update(where).update('\0').update(plan).digest();
}
