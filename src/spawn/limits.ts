// What an agent's sandbox may spend (DESIGN §7a "It ends"): the kernel enforces these inside the sandbox through
// prlimit, and svc's watchdog (src/engine/spawn-group.ts) enforces the process count where the kernel does not
// (RLIMIT_NPROC does not apply to root) and the wall-clock time. Defaults, and the policy keys that change them, are
// in docs/engine.md ("Limits").
import { which } from './which.ts';

export interface SandboxLimits {
  /** Processes (and threads) at once inside the sandbox. */
  processes: number;
  /** Writable memory of each process (RLIMIT_DATA), in bytes. */
  memoryBytes: number;
  /** The largest file a process may write (RLIMIT_FSIZE), in bytes. */
  fileBytes: number;
  /** Size of each private tmpfs (/tmp, HOME), in bytes. */
  tmpBytes: number;
}

const MIB = 1024 * 1024;

export const DEFAULT_LIMITS: SandboxLimits = {
  processes: 1024,
  memoryBytes: 8 * 1024 * MIB,
  fileBytes: 1024 * MIB,
  tmpBytes: 1024 * MIB,
};

let prlimit: string | null | undefined;

/** The prlimit command that applies `limits` to what follows it; [] where util-linux's prlimit is missing. */
export function limitArgv(limits: SandboxLimits): string[] {
  prlimit ??= which('prlimit', '/usr/bin:/bin:/usr/sbin:/sbin');
  if (!prlimit) return [];
  return [prlimit, `--nproc=${limits.processes}`, `--data=${limits.memoryBytes}`, `--fsize=${limits.fileBytes}`,
    '--core=0', '--'];
}
