// Whether bubblewrap can sandbox an agent on this host, and if not, why (for `svc doctor` and run refusals).
import { readFileSync } from 'node:fs';
import { which } from './which.ts';
import { runQuiet } from './start.ts';
import { bwrapArgv, closeSandboxFds, openSandboxFds } from './bwrap-argv.ts';
import { DEFAULT_LIMITS } from './limits.ts';

export interface SandboxProbe {
  ok: boolean;
  bwrap: string | null;
  /** kernel.unprivileged_userns_clone / user.max_user_namespaces as read, null when the file is absent. */
  userNamespaces: string | null;
  /** Why the sandbox cannot run; null when it can. */
  reason: string | null;
}

export const BWRAP_HINT = 'install the Debian package "bubblewrap" (apt-get install bubblewrap), or opt out: ' +
  'SVC_SANDBOX=none for a CLI run, "sandbox": "none" in .svc/policy.json for any run';

function readSysctl(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}

/**
 * The trial: an agent's own isolation (user, PID and network namespaces, no capabilities, the system-call filter),
 * reporting CapEff and the seccomp mode.
 */
function trialArgv(bwrap: string): string[] {
  const plan = {
    readable: [], writable: [], protect: [], hidden: [], protocolReadable: [], protocolWritable: [], home: null,
    cwd: '/', limits: DEFAULT_LIMITS, network: 'none' as const,
  };
  return bwrapArgv(bwrap, plan, ['/bin/sh', '-c', 'grep -E "^(CapEff|Seccomp):" /proc/self/status']);
}

/**
 * Finds bwrap on PATH and runs a trial sandbox shaped like an agent's; it must hold no capability at all, and run
 * under the system-call filter where this architecture has one.
 */
export function probeSandbox(env: NodeJS.ProcessEnv): SandboxProbe {
  const clone = readSysctl('/proc/sys/kernel/unprivileged_userns_clone');
  const max = readSysctl('/proc/sys/user/max_user_namespaces');
  const userNamespaces = clone === null && max === null
    ? null
    : `unprivileged_userns_clone=${clone ?? '-'} max_user_namespaces=${max ?? '-'}`;
  const bwrap = which('bwrap', env.PATH);
  if (!bwrap) return { ok: false, bwrap, userNamespaces, reason: 'bwrap not found on PATH' };
  const fds = openSandboxFds();
  const trial = runQuiet(trialArgv(bwrap), { kind: 'probe', base: { PATH: env.PATH ?? '' }, timeout: 10_000, fds });
  closeSandboxFds(fds);
  if (trial.status === 0) {
    const caps = /^CapEff:\s*([0-9a-f]+)/m.exec(trial.stdout)?.[1];
    if (caps === undefined || !/^0+$/.test(caps)) {
      const reason = `the trial sandbox kept capabilities (CapEff ${caps ?? '?'})`;
      return { ok: false, bwrap, userNamespaces, reason };
    }
    // Mode 2: a filter is installed (0 none, 1 strict).
    const seccomp = /^Seccomp:\s*(\d+)/m.exec(trial.stdout)?.[1];
    if (fds[0] !== 'ignore' && seccomp !== '2') {
      return { ok: false, bwrap, userNamespaces, reason: `the trial sandbox ran without its system-call filter ` +
        `(Seccomp ${seccomp ?? '?'})` };
    }
    return { ok: true, bwrap, userNamespaces, reason: null };
  }
  const said = (trial.stderr || trial.error?.message || `exit ${trial.status}`).trim().split('\n')[0];
  const hint = clone === '0' || max === '0' ? ' (unprivileged user namespaces are disabled on this host)' : '';
  return { ok: false, bwrap, userNamespaces, reason: `a trial bwrap sandbox failed: ${said}${hint}` };
}
