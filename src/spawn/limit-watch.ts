// svc's side of an agent's limits (DESIGN §7a "It ends"): what the kernel cannot enforce for a sandbox without
// cgroups. It samples the sandbox's processes (their count, where RLIMIT_NPROC does not apply: to root; and their
// resident memory together) and the worktree's growth on disk, and says which limit was broken; the caller ends
// the sandbox. The sampling interval bounds how far past a limit an agent can get.
import { readFileSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export interface WatchedLimits {
  processes: number;
  /** Resident memory of all the sandbox's processes together. */
  memoryBytes: number;
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
  const sampler = setInterval(() => {
    const pids = members();
    if (pids.length > limits.processes) {
      breach({ limit: 'processes', message: `more than ${limits.processes} processes at once` });
      return;
    }
    const rss = pids.reduce((n, pid) => n + residentBytes(pid), 0);
    if (rss > limits.memoryBytes) {
      const message = `${Math.round(rss / MIB)} MiB resident, over ${limits.memoryBytes / MIB} MiB`;
      breach({ limit: 'memory', message });
    }
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
