// What an agent's sandbox may spend (DESIGN §7a "It ends"): the kernel enforces these inside the sandbox through
// prlimit, a memory cgroup bounds all the sandbox's memory where the host allows one (memory-cgroup.ts), and svc's
// watchdog (src/engine/spawn-group.ts, limit-watch.ts) enforces the process count where the kernel does not
// (RLIMIT_NPROC does not apply to root), the memory where there is no cgroup, and the wall-clock time. Defaults, and
// the policy keys that change them, are in docs/engine.md ("Limits").
import { readFileSync } from 'node:fs';
import { which } from './which.ts';

export interface SandboxLimits {
  /** Processes (and threads) at once inside the sandbox. */
  processes: number;
  /** Writable memory of each process (RLIMIT_DATA), in bytes. */
  memoryBytes: number;
  /** The largest file a process may write (RLIMIT_FSIZE), in bytes. */
  fileBytes: number;
  /** Size of each private tmpfs (/tmp, HOME, /dev/shm), in bytes. */
  tmpBytes: number;
}

/**
 * Open files per process (RLIMIT_NOFILE, soft and hard). Generous for any build or test runner; it bounds how many
 * memfds a process can hold or keep in flight in a socket, and what svc's shared-memory count reads each round.
 */
export const OPEN_FILES = 8192;

const MIB = 1024 * 1024;

export const DEFAULT_LIMITS: SandboxLimits = {
  processes: 1024,
  memoryBytes: 8 * 1024 * MIB,
  fileBytes: 1024 * MIB,
  tmpBytes: 1024 * MIB,
};

let prlimit: string | null | undefined;
let openFiles: number | undefined;

/** OPEN_FILES, or this process's own hard limit where that is lower (an ordinary user cannot raise it). */
function openFilesLimit(): number {
  const hard = /^Max open files\s+\S+\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
  return hard === undefined ? OPEN_FILES : Math.min(OPEN_FILES, Number(hard));
}

/** The prlimit command that applies `limits` to what follows it; [] where util-linux's prlimit is missing. */
export function limitArgv(limits: SandboxLimits): string[] {
  prlimit ??= which('prlimit', '/usr/bin:/bin:/usr/sbin:/sbin');
  if (!prlimit) return [];
  openFiles ??= openFilesLimit();
  return [prlimit, `--nproc=${limits.processes}`, `--data=${limits.memoryBytes}`, `--fsize=${limits.fileBytes}`,
    `--nofile=${openFiles}`, '--core=0', '--'];
}
