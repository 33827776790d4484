// Memory a sandbox makes the host hold that no resident set shows, counted by the watchdog where no memory cgroup
// bounds the sandbox (docs/engine.md "Memory"): the memfds its processes hold open and the used space of every tmpfs
// in its mount namespace, each counted once.
import { readdirSync, statSync, statfsSync } from 'node:fs';
import { readOrNull, readlinkOrNull } from './tree.ts';

/** Bytes the memfds open in `pid` occupy (allocated blocks, so a sparse ftruncate costs nothing), once each. */
function addMemfds(pid: number, seen: Map<string, number>): void {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return;
  }
  for (const fd of fds) {
    if (!readlinkOrNull(`/proc/${pid}/fd/${fd}`)?.startsWith('/memfd:')) continue;
    try {
      const st = statSync(`/proc/${pid}/fd/${fd}`);
      seen.set(`${st.dev}:${st.ino}`, st.blocks * 512);
    } catch {
      // closed meanwhile
    }
  }
}

/** Octal escapes (`\040`) in mountinfo paths. */
export function unescapeMount(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Used bytes of each tmpfs mounted in `pid`'s mount namespace, keyed by device so each counts once. */
function addTmpfs(pid: number, seen: Map<string, number>): void {
  for (const line of (readOrNull(`/proc/${pid}/mountinfo`) ?? '').split('\n')) {
    const [left, right] = line.split(' - ');
    const fields = left?.split(' ') ?? [];
    if (!right?.startsWith('tmpfs ') || fields.length < 5) continue;
    const device = fields[2]!;
    if (seen.has(device)) continue;
    try {
      const fs = statfsSync(`/proc/${pid}/root${unescapeMount(fields[4]!)}`);
      seen.set(device, (fs.blocks - fs.bfree) * fs.bsize);
    } catch {
      // unmounted meanwhile, or hidden under a later mount
    }
  }
}

/** The shared memory of the processes `pids` (host pids of one sandbox), in bytes. */
export function sharedMemoryBytes(pids: readonly number[]): number {
  const memfds = new Map<string, number>();
  const tmpfs = new Map<string, number>();
  const ownMounts = readlinkOrNull('/proc/self/ns/mnt');
  const namespaces = new Set<string>();
  for (const pid of pids) {
    addMemfds(pid, memfds);
    // The tmpfs of each mount namespace the sandbox has, once; never svc's own (bwrap's outer process shares it).
    const ns = readlinkOrNull(`/proc/${pid}/ns/mnt`);
    if (ns === null || ns === ownMounts || namespaces.has(ns)) continue;
    namespaces.add(ns);
    addTmpfs(pid, tmpfs);
  }
  let total = 0;
  for (const bytes of memfds.values()) total += bytes;
  for (const bytes of tmpfs.values()) total += bytes;
  return total;
}
