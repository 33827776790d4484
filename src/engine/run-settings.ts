// The provider a run uses and what it may have, read once from the repository's .svc/config.json and the operator's
// files and decided by setting-authority.ts: used by `svc start` before it makes a run, and by the run's worker.
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { RefusedError } from '../errors.ts';
import { readEngineConfigFile } from './config.ts';
import { loadOperatorConfig, passedValues } from './operator-config.ts';
import { isTrusted, trustRecordOf } from './trust.ts';
import { decideSettings, serverRefusal, trustNeeded, wideningFor } from './setting-authority.ts';
import { resolveProvider, type ResolvedProvider } from './providers.ts';
import { agentSandboxPlan } from '../spawn/agent-plan.ts';
import { shownBy } from '../spawn/plan-visibility.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';

/** A CLI run's repository file asks for operator-only settings and the person has not trusted this exact file. */
export class TrustNeededError extends RefusedError {}

/** A command provider's argv names a file its sandbox does not show. */
export class OutsideViewError extends RefusedError {}

export interface RunSettings {
  provider: ResolvedProvider;
  /** What svc's environment passes to the agent and the checks by name (the operator's list, or a trusted file's). */
  passedEnv: Record<string, string>;
  /** For the run's log: settings left out, and why. */
  notes: string[];
}

/** A run a server started: the trigger server and the Control Plane always set SVC_ORIGIN (DESIGN §7a). */
export function startedByServer(env: NodeJS.ProcessEnv): boolean {
  return !!env.SVC_ORIGIN && env.SVC_ORIGIN !== 'cli';
}

function decide(repo: string, workdir: string, env: NodeJS.ProcessEnv) {
  const file = readEngineConfigFile(repo);
  const server = startedByServer(env);
  const trusted = !server && file !== null && isTrusted(env, file.path, file.sha256);
  const home = env.HOME || homedir();
  const pathDirs = (env.PATH ?? '').split(':').filter(isAbsolute);
  const decided = decideSettings(file?.config ?? null, loadOperatorConfig(env), {
    server, trusted, home, workdir, pathDirs,
  });
  return { file, server, decided };
}

/**
 * Resolves the run's provider under the rule. A CLI run whose provider needs settings of an untrusted file is
 * refused (TrustNeededError); a server-started run goes on without them, and `notes` say so.
 */
export function runSettings(
  requested: string | null, repo: string, workdir: string, env: NodeJS.ProcessEnv,
): RunSettings {
  const { file, server, decided } = decide(repo, workdir, env);
  const provider = resolveProvider(requested, decided.config, env);
  const widening = wideningFor(decided.widening, provider.name);
  if (widening.length && !server && file) {
    throw new TrustNeededError(trustNeeded(widening, file.path, trustRecordOf(env, file.path) !== null));
  }
  return {
    provider,
    passedEnv: passedValues(decided.env, env),
    notes: [...decided.notes, ...(server ? widening.map(serverRefusal) : [])],
  };
}

/** Only what the environment passes (a re-verify runs checks, no provider): the operator's names, a trusted file's. */
export function passedEnvFor(repo: string, workdir: string, env: NodeJS.ProcessEnv): Record<string, string> {
  return passedValues(decide(repo, workdir, env).decided.env, env);
}

/**
 * Refuses a command provider whose program or script arguments (absolute paths) are not there inside its sandbox,
 * before the run starts: inside it would only fail with "No such file". `workdir` is where the run will work.
 */
export function refuseOutsideView(
  provider: ResolvedProvider, repo: string, workdir: string, env: NodeJS.ProcessEnv,
): void {
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
  throw new OutsideViewError(
    `Refusing to start: provider "${provider.name}" names ${missing}, which its sandbox does not show (it sees the ` +
      'working tree, the folders on PATH, the system folders and its own program\'s folder). Put the script in the ' +
      'repository and name it relative to it (e.g. ["sh", ".svc/agent.sh"]; a --worktree run sees what is ' +
      'committed), or install it in a folder on PATH',
  );
}
