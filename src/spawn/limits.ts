// What an agent's sandbox may spend (DESIGN §7a "It ends"; docs/engine.md "Limits" and "Memory" say who enforces
// each): prlimit's arguments, and svc's watchdog (watchLimits) for what the kernel or a memory cgroup does not bound.
import { readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { which } from './which.ts';
import { sharedMemoryBytes } from './shared-memory.ts';
import { readOrNull } from './tree.ts';
import type { MemoryCgroup } from './memory-cgroup.ts';

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
const OPEN_FILES = 8192;

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

export interface WatchedLimits {
  processes: number;
  /** All the sandbox's memory together: its cgroup's limit, or resident plus shared memory as svc counts it. */
  memoryBytes: number;
  /** The sandbox's memory cgroup, where it has one (set by whoever starts the sandbox). */
  cgroup?: MemoryCgroup | null;
  /** The folder whose growth is bounded (the worktree; its .git is not counted), and by how much. */
  diskDir: string | null;
  diskBytes: number;
}

type LimitBreach = { limit: 'processes' | 'memory' | 'disk'; message: string };

const SAMPLE_MS = 250;
const DISK_SAMPLE_MS = 5_000;
const PAGE = 4096;

function residentBytes(pid: number): number {
  return Number(readOrNull(`/proc/${pid}/statm`)?.split(' ')[1]) * PAGE || 0;
}

/** Bytes under `dir` (files as their size, skipping `.git`), counted without following links; stops past `cap`. */
async function treeBytes(dir: string, cap: number): Promise<number> {
  let total = 0;
  const pending = [dir];
  while (pending.length && total <= cap) {
    const folder = pending.pop()!;
    let entries;
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (entry.name === '.git' && folder === dir) continue;
      const path = join(folder, entry.name);
      if (entry.isDirectory()) pending.push(path);
      else {
        try {
          total += (await lstat(path)).size;
        } catch {
          // gone meanwhile
        }
      }
    }
  }
  return total;
}

/** Says so when the sandbox's memory broke its limit (the kernel killed for it in its cgroup), or null. */
export function memoryBreach(limits: WatchedLimits): string | null {
  const kills = limits.cgroup?.oomKills() ?? 0;
  return kills > 0
    ? `its processes needed more than ${limits.memoryBytes / MIB} MiB together (the kernel ended ${kills} of them)`
    : null;
}

/**
 * The shared-memory count, at most as often as it stays cheap: each count waits ten times as long as the last one
 * took (at least one sample), so an agent holding thousands of descriptors costs the worker at most a tenth of a core.
 */
function sharedCounter(): (pids: number[]) => number {
  let last = 0;
  let due = 0;
  return (pids) => {
    const now = Date.now();
    if (now < due) return last;
    last = sharedMemoryBytes(pids);
    due = now + Math.max(SAMPLE_MS, 10 * (Date.now() - now));
    return last;
  };
}

/** Resident plus shared memory over the limit, counted by svc where there is no cgroup; null while under it. */
function overMemory(limits: WatchedLimits, pids: number[], sharedBytes: (pids: number[]) => number): string | null {
  if (limits.cgroup) return memoryBreach(limits);
  const rss = pids.reduce((n, pid) => n + residentBytes(pid), 0);
  if (rss > limits.memoryBytes) return `${Math.round(rss / MIB)} MiB resident, over ${limits.memoryBytes / MIB} MiB`;
  const shared = sharedBytes(pids);
  if (rss + shared <= limits.memoryBytes) return null;
  return `${Math.round(rss / MIB)} MiB resident and ${Math.round(shared / MIB)} MiB in memfds and tmpfs, over ` +
    `${limits.memoryBytes / MIB} MiB`;
}

/** Starts watching; `members` lists the sandbox's host pids. Returns the function that stops the watch. */
export function watchLimits(
  limits: WatchedLimits, members: () => number[], onBreach: (breach: LimitBreach) => void,
): () => void {
  let stopped = false;
  const breach = (b: LimitBreach) => {
    if (stopped) return;
    stopped = true;
    clear();
    onBreach(b);
  };
  const shared = sharedCounter();
  const sampler = setInterval(() => {
    const pids = members();
    if (pids.length > limits.processes) {
      breach({ limit: 'processes', message: `more than ${limits.processes} processes at once` });
      return;
    }
    const over = overMemory(limits, pids, shared);
    if (over) breach({ limit: 'memory', message: over });
  }, SAMPLE_MS);
  sampler.unref();
  let disk: NodeJS.Timeout | undefined;
  if (limits.diskDir) {
    const dir = limits.diskDir;
    let baseline: number | null = null;
    // Walking a big worktree costs the worker: the next walk waits ten times as long as the last one took (at least
    // 5 s), so the watch takes at most a tenth of a core however many files the agent makes.
    const measure = async (): Promise<void> => {
      if (stopped) return;
      const started = Date.now();
      const bytes = await treeBytes(dir, (baseline ?? Infinity) + limits.diskBytes);
      baseline ??= bytes;
      if (bytes - baseline > limits.diskBytes) {
        breach({ limit: 'disk', message: `the worktree grew by more than ${limits.diskBytes / MIB} MiB` });
        return;
      }
      if (stopped) return;
      disk = setTimeout(() => void measure(), Math.max(DISK_SAMPLE_MS, 10 * (Date.now() - started)));
      disk.unref();
    };
    void measure();
  }
  function clear() {
    clearInterval(sampler);
    if (disk) clearTimeout(disk);
  }
  return () => {
    stopped = true;
    clear();
  };
}
