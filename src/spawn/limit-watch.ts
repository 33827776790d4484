// svc's side of an agent's limits (DESIGN §7a "It ends"): what the kernel does not enforce for the sandbox. It samples
// the sandbox's processes (their count, where RLIMIT_NPROC does not apply: to root) and the worktree's growth on disk,
// and watches its memory: with a memory cgroup (memory-cgroup.ts) the kernel bounds it and svc only reads whether the
// kernel had to kill for it; without one, svc adds up the processes' resident memory and the shared memory that no
// resident set shows (shared-memory.ts: memfds, tmpfs). It says which limit was broken; the caller ends the sandbox.
// The sampling interval bounds how far past a limit an agent can get without a cgroup.
import { readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { sharedMemoryBytes } from './shared-memory.ts';
import type { MemoryCgroup } from './memory-cgroup.ts';

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

export type LimitBreach = { limit: 'processes' | 'memory' | 'disk'; message: string };

const SAMPLE_MS = 250;
const DISK_SAMPLE_MS = 5_000;
const PAGE = 4096;

function residentBytes(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/statm`, 'latin1').split(' ')[1]) * PAGE || 0;
  } catch {
    return 0;
  }
}

/** Bytes under `dir` (files as their size, skipping `.git`), counted without following links; stops past `cap`. */
export async function treeBytes(dir: string, cap: number): Promise<number> {
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

const MIB = 1024 * 1024;

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
