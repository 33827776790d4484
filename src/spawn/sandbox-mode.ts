// Whether a run's agents are sandboxed, decided once per run (by its launcher, into the run's plan) from the project
// policy, the origin and the host (DESIGN §7a; docs/engine.md "Choosing it"). Default: bwrap, and without a working
// sandbox no agent runs unless the opt-out that applies to its origin says so.
import { UnavailableError } from '../errors.ts';
import { settingChoice } from '../settings-registry.ts';
import { probeSandboxCached } from './probe.ts';

type SandboxSetting = 'bwrap' | 'none';

export type SandboxMode = { kind: 'bwrap'; bwrap: string } | { kind: 'none'; why: string };

/** The sandbox was asked for and cannot run; the message names the package and the opt-out that applies. */
export class SandboxUnavailableError extends UnavailableError {}

const OPT_OUT_CLI = 'SVC_SANDBOX=none or "sandbox": "none" in the project\'s .svc/policy.json';
const OPT_OUT_SERVER =
  'SVC_SERVER_SANDBOX=none in the environment of the server itself (the Control Plane or the trigger server)';

/**
 * The sandbox for a run svc is about to start with `env`; `policy` is the project's choice (null: bwrap). Only a run a
 * person started at the CLI may opt out by its policy or SVC_SANDBOX: a repository's policy is written by whoever can
 * push to it, the agent included. A server's run goes unsandboxed only by SVC_SERVER_SANDBOX=none (DESIGN §7a).
 */
export function resolveSandbox(policy: SandboxSetting | null, env: NodeJS.ProcessEnv): SandboxMode {
  const cli = !env.SVC_ORIGIN || env.SVC_ORIGIN === 'cli';
  const variable = cli ? 'SVC_SANDBOX' : 'SVC_SERVER_SANDBOX';
  const fromEnv = settingChoice(env, variable);
  if (cli && policy === 'none') return { kind: 'none', why: 'the project policy says "sandbox": "none"' };
  if (fromEnv === 'none') return { kind: 'none', why: `${variable}=none` };
  const probe = probeSandboxCached(env);
  if (probe.ok && probe.bwrap) return { kind: 'bwrap', bwrap: probe.bwrap };
  throw new SandboxUnavailableError(
    `Refusing to start: agents run in a bubblewrap sandbox and it does not work on this host (${probe.reason}). ` +
      `Install the Debian package "bubblewrap" (apt-get install bubblewrap; \`svc doctor\` checks the host), ` +
      `or opt out with ${cli ? OPT_OUT_CLI : OPT_OUT_SERVER}`,
  );
}

/** Said in a server-started run's log when its project's policy asks for no sandbox: it runs sandboxed anyway. */
export function ignoredPolicyNote(policy: SandboxSetting | null, env: NodeJS.ProcessEnv): string | null {
  const cli = !env.SVC_ORIGIN || env.SVC_ORIGIN === 'cli';
  if (cli || policy !== 'none') return null;
  return 'The project policy says "sandbox": "none"; a run a server started is sandboxed all the same ' +
    `(only ${OPT_OUT_SERVER} turns it off)`;
}

/** The warning a person sees (stderr) and the run's log records when an agent runs unconfined. */
export function unsandboxedWarning(mode: SandboxMode): string | null {
  if (mode.kind !== 'none') return null;
  return `WARNING: the agent runs WITHOUT a sandbox (${mode.why}): it can read everything this user can, ` +
    'including svc\'s keys and tokens. svc still ends every process it starts when the provider exits.';
}
