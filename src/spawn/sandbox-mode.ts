// Whether a run's agents are sandboxed (DESIGN §7a; docs/engine.md "Choosing it"), decided once per run by its
// launcher from the project policy, the origin and whether bubblewrap works here. A working probe is kept for this
// boot in `~/.svc/sandbox-probe.json` (~13 ms a run otherwise); a failure is probed again each time.
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { errorMessage, UnavailableError } from '../errors.ts';
import { settingChoice } from '../settings-registry.ts';
import { runSync } from './start.ts';
import { bwrapArgv, closeSandboxFds, openSandboxFds } from './bwrap-argv.ts';
import { DEFAULT_LIMITS, findPrlimit, PRLIMIT_HINT, PRLIMIT_MISSING } from './limits.ts';
import { svcHomeOf, which } from './svc-paths.ts';
import { orNull, pathKind, readOrNull } from './tree.ts';
import { obj, tryParseJson } from '../untrusted.ts';
import { writeFileAtomic } from '../atomic-write.ts';

type SandboxSetting = 'bwrap' | 'none';

export type SandboxMode = { kind: 'bwrap'; bwrap: string } | { kind: 'none'; why: string };

/** The sandbox was asked for and cannot run; the message names the package and the opt-out that applies. */
export class SandboxUnavailableError extends UnavailableError {}

export type SandboxProbe = ReturnType<typeof probeSandbox>;

const OPT_OUT_CLI = 'SVC_SANDBOX=none, or "sandbox": "none" in the project\'s .svc/policy.json once you trusted it ' +
  '(`svc trust`)';
const OPT_OUT_SERVER =
  'SVC_SERVER_SANDBOX=none in the environment of the server itself (the Control Plane or the trigger server)';

// A server-started run never takes the repository's word for it (resolveSandbox): each opt-out named where it works.
export const BWRAP_HINT = 'install the Debian package "bubblewrap" (apt-get install bubblewrap), or opt out: ' +
  `for a CLI run ${OPT_OUT_CLI}; for a run a server starts ${OPT_OUT_SERVER}`;

/** A run a server started: the trigger server and the Control Plane always set SVC_ORIGIN (DESIGN §7a). */
export function startedByServer(env: NodeJS.ProcessEnv): boolean {
  return !!env.SVC_ORIGIN && env.SVC_ORIGIN !== 'cli';
}

/** The opt-out that runs agents unconfined, if one applies (the policy's for a CLI run, or the variable): no probe. */
export function sandboxOptOut(policy: SandboxSetting | null, env: NodeJS.ProcessEnv): SandboxMode | null {
  const cli = !startedByServer(env);
  const variable = cli ? 'SVC_SANDBOX' : 'SVC_SERVER_SANDBOX';
  if (cli && policy === 'none') return { kind: 'none', why: 'the project policy says "sandbox": "none"' };
  if (settingChoice(env, variable) === 'none') return { kind: 'none', why: `${variable}=none` };
  return null;
}

/**
 * The sandbox for a run svc is about to start with `env`; `policy` is the project's choice (null: bwrap), whose "none"
 * the caller passes only from a policy.json the person trusted (run-plan.ts). Only a run a person started at the CLI
 * may opt out by its policy or SVC_SANDBOX: a repository's policy is written by whoever can push to it, the agent
 * included. A server's run goes unsandboxed only by SVC_SERVER_SANDBOX=none.
 */
export function resolveSandbox(policy: SandboxSetting | null, env: NodeJS.ProcessEnv): SandboxMode {
  const optedOut = sandboxOptOut(policy, env);
  if (optedOut) return optedOut;
  const cli = !startedByServer(env);
  const probe = probeSandboxCached(env);
  if (probe.ok && probe.bwrap) return { kind: 'bwrap', bwrap: probe.bwrap };
  const optOut = cli ? OPT_OUT_CLI : OPT_OUT_SERVER;
  // A sandbox without prlimit would hold the agent with no kernel limit at all, which no setting asks for.
  if (probe.bwrap && !probe.prlimit) {
    throw new SandboxUnavailableError(
      `Refusing to start: agents run in a bubblewrap sandbox and ${PRLIMIT_MISSING}: ${PRLIMIT_HINT} ` +
        `(\`svc doctor\` checks the host). Only to run agents unconfined, opt out with ${optOut}`,
    );
  }
  // An installed bwrap that failed is fixed where the namespaces are refused; installing it again changes nothing.
  if (probe.bwrap) {
    const fix = namespacesRefused(probe)
      ? `${NAMESPACES_HINT}; \`svc doctor\` checks the host`
      : '`svc doctor` says why';
    throw new SandboxUnavailableError(
      `Refusing to start: agents run in a bubblewrap sandbox and ${probe.bwrap} could not set it up here ` +
        `(${probe.reason}). ${fix}. Only to run agents unconfined, opt out with ${optOut}`,
    );
  }
  // Both missing: both are said, so installing bwrap is not followed by a second refusal (as svc doctor's fix).
  const andPrlimit = probe.prlimit === null ? `; and ${PRLIMIT_HINT}` : '';
  throw new SandboxUnavailableError(
    `Refusing to start: agents run in a bubblewrap sandbox and it does not work on this host (${probe.reason}). ` +
      `Install the Debian package "bubblewrap" (apt-get install bubblewrap${andPrlimit}; \`svc doctor\` checks the ` +
      `host), or opt out with ${optOut}`,
  );
}

/** Where an installed bwrap's namespaces are refused: the service's unit, or the host (docs/deploy.md "systemd"). */
export const NAMESPACES_HINT = 'bwrap could not create its namespaces: under systemd the unit must allow them ' +
  '(RestrictNamespaces must list every namespace bwrap creates, RestrictAddressFamilies AF_NETLINK; docs/deploy.md ' +
  '"systemd" lists them), and the host must allow unprivileged user namespaces (sysctl user.max_user_namespaces ' +
  'above 0, kernel.unprivileged_userns_clone=1 where it exists)';

const TRIAL_FAILED = 'a trial bwrap sandbox failed';

/** bwrap was found and its trial sandbox did not start (rather than starting with too much left to it). */
export function namespacesRefused(probe: SandboxProbe): boolean {
  return probe.bwrap !== null && probe.reason !== null && probe.reason.startsWith(TRIAL_FAILED);
}

/** Said in a server-started run's log when its project's policy asks for no sandbox: it runs sandboxed anyway. */
export function ignoredPolicyNote(policy: SandboxSetting | null, env: NodeJS.ProcessEnv): string | null {
  if (!startedByServer(env) || policy !== 'none') return null;
  return 'The project policy says "sandbox": "none"; a run a server started is sandboxed all the same ' +
    `(only ${OPT_OUT_SERVER} turns it off)`;
}

// Bumped whenever the trial or its result changes shape, so an old "works" is never reused for a new trial.
const TRIAL_VERSION = 5;

function readSysctl(path: string): string | null {
  return readOrNull(path)?.trim() ?? null;
}

/** The trial, an agent's own isolation reporting CapEff and the seccomp mode: its stdout, or why it failed. */
function runTrial(bwrap: string, env: NodeJS.ProcessEnv, fds: Array<number | 'ignore'>): string | { failed: string } {
  const plan = {
    readable: [], writable: [], protect: [], hidden: [], protocolReadable: [], protocolWritable: [], home: null,
    cwd: '/', limits: DEFAULT_LIMITS, network: 'none' as const,
  };
  const argv = bwrapArgv(bwrap, plan, ['/bin/sh', '-c', 'grep -E "^(CapEff|Seccomp):" /proc/self/status']);
  try {
    return runSync(argv, { kind: 'probe', base: { PATH: env.PATH ?? '' }, timeout: 10_000, fds });
  } catch (err) {
    return { failed: `${(err as { stderr?: unknown }).stderr ?? ''}` || errorMessage(err) };
  }
}

/**
 * Finds bwrap on PATH and prlimit where the sandbox runs it (limits.ts), and runs a trial sandbox shaped like an
 * agent's, through that prlimit; it must hold no capability at all, and run under the system-call filter where this
 * architecture has one. `svc doctor` always probes afresh.
 */
export function probeSandbox(env: NodeJS.ProcessEnv) {
  const clone = readSysctl('/proc/sys/kernel/unprivileged_userns_clone');
  const max = readSysctl('/proc/sys/user/max_user_namespaces');
  const userNamespaces = clone === null && max === null
    ? null
    : `unprivileged_userns_clone=${clone ?? '-'} max_user_namespaces=${max ?? '-'}`;
  const bwrap = which('bwrap', env.PATH);
  const prlimit = findPrlimit();
  const probe = (reason: string | null) => ({ ok: reason === null, bwrap, prlimit, userNamespaces, reason });
  if (!bwrap) return probe('bwrap not found on PATH');
  if (!prlimit) return probe(PRLIMIT_MISSING);
  const fds = openSandboxFds();
  const trial = runTrial(bwrap, env, fds);
  closeSandboxFds(fds);
  if (typeof trial !== 'string') {
    const said = trial.failed.trim().split('\n')[0];
    const hint = clone === '0' || max === '0' ? ' (unprivileged user namespaces are disabled on this host)' : '';
    return probe(`${TRIAL_FAILED}: ${said}${hint}`);
  }
  const caps = /^CapEff:\s*([0-9a-f]+)/m.exec(trial)?.[1] ?? '?';
  if (!/^0+$/.test(caps)) return probe(`the trial sandbox kept capabilities (CapEff ${caps})`);
  // Mode 2: a filter is installed (0 none, 1 strict).
  const seccomp = /^Seccomp:\s*(\d+)/m.exec(trial)?.[1];
  if (fds[0] === 'ignore' || seccomp === '2') return probe(null);
  return probe(`the trial sandbox ran without its system-call filter (Seccomp ${seccomp ?? '?'})`);
}

/** What a cached result depends on (prlimit too: a "works" must not outlive it); null when a binary cannot be read. */
function cacheKey(bwrap: string, prlimit: string | null): string | null {
  const binary = orNull(() => statSync(bwrap));
  const limiter = prlimit === null ? null : orNull(() => statSync(prlimit));
  return binary && limiter && [TRIAL_VERSION, readSysctl('/proc/sys/kernel/random/boot_id') ?? '-',
    process.getuid?.() ?? '-', bwrap, binary.size, binary.mtimeMs, prlimit, limiter.size, limiter.mtimeMs,
    readSysctl('/proc/sys/user/max_user_namespaces') ?? '-',
    readSysctl('/proc/sys/kernel/unprivileged_userns_clone') ?? '-'].join('|');
}

/** The probe for this host, from this boot's cache when it still applies. */
function probeSandboxCached(env: NodeJS.ProcessEnv): SandboxProbe {
  const bwrap = which('bwrap', env.PATH);
  const key = bwrap ? cacheKey(bwrap, findPrlimit()) : null;
  if (!key) return probeSandbox(env);
  const home = svcHomeOf(env);
  const path = join(home, 'sandbox-probe.json');
  // None yet, or unreadable: probed again.
  const cached = pathKind(path) === 'file' ? obj(tryParseJson(readOrNull(path) ?? '')) : {};
  if (cached.key === key && obj(cached.probe).ok === true) return cached.probe as SandboxProbe;
  const probe = probeSandbox(env);
  if (!probe.ok) return probe;
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    writeFileAtomic(path, JSON.stringify({ key, probe }), 0o600);
  } catch {
    // no writable ~/.svc: the next run probes again
  }
  return probe;
}
