// Whether a run's agents are sandboxed, decided once per run (by its launcher, into the run's plan) from the project
// policy, the origin and the host (DESIGN §7a). Default: bwrap. Opting out is explicit: `"sandbox": "none"` in
// .svc/policy.json (any origin), or SVC_SANDBOX=none for a run a person starts at the CLI. Without a working sandbox,
// nothing else runs an agent.
import { UnavailableError } from '../errors.ts';
import { settingChoice } from '../settings-registry.ts';
import { probeSandboxCached } from './probe.ts';

export type SandboxSetting = 'bwrap' | 'none';

export type SandboxMode = { kind: 'bwrap'; bwrap: string } | { kind: 'none'; why: string };

/** The sandbox was asked for and cannot run; the message names the package and the opt-out that applies. */
export class SandboxUnavailableError extends UnavailableError {}

export const OPT_OUT_CLI = 'SVC_SANDBOX=none or "sandbox": "none" in the project\'s .svc/policy.json';
export const OPT_OUT_SERVER =
  'SVC_SERVER_SANDBOX=none in the environment of the server itself (the Control Plane or the trigger server)';

/**
 * The sandbox for a run svc is about to start with `env`. `policy` is the project's choice (null: not set, which means
 * bwrap). A run a person started at the CLI (no SVC_ORIGIN, or "cli") may opt out by its policy or SVC_SANDBOX. A run a
 * server started (the trigger server and the Control Plane always set SVC_ORIGIN) may not: a repository's policy is
 * written by whoever can push to it, and the agent itself may have written it. Only the server's own configuration,
 * SVC_SERVER_SANDBOX=none, which its launchers pass on by name, switches the sandbox off for it (DESIGN §7a).
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
