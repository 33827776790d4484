// Whether bubblewrap can sandbox an agent on this host, and if not, why (for `svc doctor` and run refusals).
import { readFileSync } from 'node:fs';
import { which } from '../engine/which.ts';
import { runQuiet } from './start.ts';

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

/** Finds bwrap on PATH and runs a trial sandbox shaped like an agent's (own PID namespace, fresh /proc). */
export function probeSandbox(env: NodeJS.ProcessEnv): SandboxProbe {
  const clone = readSysctl('/proc/sys/kernel/unprivileged_userns_clone');
  const max = readSysctl('/proc/sys/user/max_user_namespaces');
  const userNamespaces = clone === null && max === null ? null : `unprivileged_userns_clone=${clone ?? '-'} max_user_namespaces=${max ?? '-'}`;
  const bwrap = which('bwrap', env.PATH);
  if (!bwrap) return { ok: false, bwrap, userNamespaces, reason: 'bwrap not found on PATH' };
  const trial = runQuiet([bwrap, '--unshare-pid', '--die-with-parent', '--ro-bind', '/', '/', '--dev', '/dev',
    '--proc', '/proc', '--tmpfs', '/tmp', '--', 'true'],
  { kind: 'probe', base: { PATH: env.PATH ?? '' }, timeout: 10_000 });
  if (trial.status === 0) return { ok: true, bwrap, userNamespaces, reason: null };
  const said = (trial.stderr || trial.error?.message || `exit ${trial.status}`).trim().split('\n')[0];
  const hint = clone === '0' || max === '0' ? ' (unprivileged user namespaces are disabled on this host)' : '';
  return { ok: false, bwrap, userNamespaces, reason: `a trial bwrap sandbox failed: ${said}${hint}` };
}
